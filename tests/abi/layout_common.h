/*
 * layout_common.h - compile-time checks of the ND and Win32 types, shared
 * by layout.c (C) and layout.cpp (C++).  Sizes and offsets are those of
 * 64-bit Windows, which the ABI keeps on Linux (LP64).
 *
 * The including file defines SA(cond, msg) (_Static_assert or static_assert)
 * and NDABI_ALIGNOF(type) (_Alignof or alignof).
 */
#include <stddef.h>

#define OFF(type, field, off) SA(offsetof(type, field) == (off), #type "." #field " offset")
#define SIZE(type, size) SA(sizeof(type) == (size), "sizeof " #type)
#define ALIGN(type, al) SA(NDABI_ALIGNOF(type) == (al), "alignof " #type)

/* ---- widths (Windows LLP64 widths on LP64) ---- */
SIZE(BYTE, 1); SIZE(UCHAR, 1); SIZE(CHAR, 1); SIZE(BOOLEAN, 1); SIZE(UINT8, 1);
SIZE(USHORT, 2); SIZE(WORD, 2); SIZE(SHORT, 2); SIZE(UINT16, 2); SIZE(INT16, 2);
SIZE(ADDRESS_FAMILY, 2);
SIZE(INT, 4); SIZE(UINT, 4); SIZE(LONG, 4); SIZE(ULONG, 4); SIZE(DWORD, 4);
SIZE(BOOL, 4); SIZE(INT32, 4); SIZE(UINT32, 4); SIZE(HRESULT, 4); SIZE(NTSTATUS, 4);
SIZE(LONGLONG, 8); SIZE(ULONGLONG, 8); SIZE(INT64, 8); SIZE(UINT64, 8); SIZE(DWORD64, 8);
SIZE(LONG64, 8); SIZE(ULONG64, 8);
SIZE(SIZE_T, sizeof(void *)); SIZE(SSIZE_T, sizeof(void *)); SIZE(ULONG_PTR, sizeof(void *));
SIZE(LONG_PTR, sizeof(void *)); SIZE(UINT_PTR, sizeof(void *)); SIZE(INT_PTR, sizeof(void *));
SIZE(DWORD_PTR, sizeof(void *)); SIZE(KAFFINITY, sizeof(void *)); SIZE(HANDLE, sizeof(void *));
SIZE(PVOID, sizeof(void *)); SIZE(ND_MR_HANDLE, sizeof(void *));
SIZE(ND2_REQUEST_TYPE, 4);
SIZE(WCHAR, sizeof(wchar_t));
SIZE(SOCKET, sizeof(int));
SIZE(void *, 8); /* these tests are for 64-bit targets */

/* ---- signedness ---- */
SA((LONG)-1 < 0, "LONG signed"); SA((ULONG)-1 > 0, "ULONG unsigned");
SA((DWORD)-1 > 0, "DWORD unsigned"); SA((HRESULT)-1 < 0, "HRESULT signed");
SA((NTSTATUS)-1 < 0, "NTSTATUS signed"); SA((SIZE_T)-1 > 0, "SIZE_T unsigned");
SA((ULONG_PTR)-1 > 0, "ULONG_PTR unsigned"); SA((LONG_PTR)-1 < 0, "LONG_PTR signed");
SA((LONGLONG)-1 < 0, "LONGLONG signed"); SA((ULONGLONG)-1 > 0, "ULONGLONG unsigned");
SA((UINT64)-1 > 0, "UINT64 unsigned"); SA((USHORT)-1 > 0, "USHORT unsigned");
SA((BOOL)-1 < 0, "BOOL is int");

/* ---- status codes: values, 32-bit width, severities ---- */
#include "status_values.inc"
SA(SUCCEEDED(ND_SUCCESS) && SUCCEEDED(ND_TIMEOUT) && SUCCEEDED(ND_PENDING), "success codes");
SA(FAILED(ND_BUFFER_OVERFLOW) && FAILED(ND_DEVICE_BUSY) && FAILED(ND_NO_MORE_ENTRIES),
   "warning codes are FAILED");
SA(FAILED(ND_CANCELED) && ND_CANCELED < 0, "error codes are negative");
SA(ND_CANCELED == STATUS_CANCELLED, "ND codes equal their NTSTATUS");
SA(HRESULT_FROM_WIN32(ERROR_OPERATION_ABORTED) == (HRESULT)0x800703E3U, "HRESULT_FROM_WIN32");
SA(HRESULT_FROM_WIN32(0) == 0, "HRESULT_FROM_WIN32(0)");

/* ---- Win32 constants clients test ---- */
SA(WAIT_OBJECT_0 == 0 && WAIT_TIMEOUT == 258 && WAIT_FAILED == 0xFFFFFFFF, "WAIT_*");
SA(INFINITE == 0xFFFFFFFF, "INFINITE");
SA(ERROR_OPERATION_ABORTED == 995 && ERROR_INVALID_HANDLE == 6 &&
   ERROR_INVALID_PARAMETER == 87 && ERROR_IO_PENDING == 997 && WSAEINVAL == 10022,
   "ERROR_*");
SA(FILE_SKIP_COMPLETION_PORT_ON_SUCCESS == 1 && FILE_SKIP_SET_EVENT_ON_HANDLE == 2,
   "FILE_SKIP_*");
SA(HEAP_ZERO_MEMORY == 8, "HEAP_ZERO_MEMORY");
SA(TRUE == 1 && FALSE == 0, "TRUE/FALSE");

/* ---- nddef.h / ndsupport.h constants ---- */
SA(ND_VERSION_1 == 1 && ND_VERSION_2 == 0x20000 && NDVER == ND_VERSION_2, "versions");
SA(ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED == 0x1 &&
   ND_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED == 0x4 &&
   ND_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED == 0x8 &&
   ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED == 0x100 &&
   ND_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED == 0x10000, "ND_ADAPTER_FLAG_*");
SA(ND_CQ_NOTIFY_ERRORS == 0 && ND_CQ_NOTIFY_ANY == 1 && ND_CQ_NOTIFY_SOLICITED == 2,
   "ND_CQ_NOTIFY_*");
SA(ND_MR_FLAG_ALLOW_LOCAL_WRITE == 1 && ND_MR_FLAG_ALLOW_REMOTE_READ == 2 &&
   ND_MR_FLAG_ALLOW_REMOTE_WRITE == 5 && ND_MR_FLAG_RDMA_READ_SINK == 8 &&
   ND_MR_FLAG_DO_NOT_SECURE_VM == 0x80000000, "ND_MR_FLAG_*");
SA(ND_OP_FLAG_SILENT_SUCCESS == 1 && ND_OP_FLAG_READ_FENCE == 2 &&
   ND_OP_FLAG_SEND_AND_SOLICIT_EVENT == 4 && ND_OP_FLAG_ALLOW_READ == 8 &&
   ND_OP_FLAG_ALLOW_WRITE == 0x10 && ND_OP_FLAG_INLINE == 0x20, "ND_OP_FLAG_*");
SA(Nd2RequestTypeReceive == 0 && Nd2RequestTypeSend == 1 && Nd2RequestTypeBind == 2 &&
   Nd2RequestTypeInvalidate == 3 && Nd2RequestTypeRead == 4 && Nd2RequestTypeWrite == 5,
   "ND2_REQUEST_TYPE");
SA(ND_QUERY_EXCLUDE_EMULATOR_ADDRESSES == 1 && ND_QUERY_EXCLUDE_NDv1_ADDRESSES == 2 &&
   ND_QUERY_EXCLUDE_NDv2_ADDRESSES == 4, "ND_QUERY_EXCLUDE_*");

/* ---- GUID ---- */
SIZE(GUID, 16); ALIGN(GUID, 4);
OFF(GUID, Data1, 0); OFF(GUID, Data2, 4); OFF(GUID, Data3, 6); OFF(GUID, Data4, 8);

/* ---- ND2_ADAPTER_INFO: 96 bytes ---- */
SIZE(ND2_ADAPTER_INFO, 96); ALIGN(ND2_ADAPTER_INFO, 8);
OFF(ND2_ADAPTER_INFO, InfoVersion, 0); OFF(ND2_ADAPTER_INFO, VendorId, 4);
OFF(ND2_ADAPTER_INFO, DeviceId, 6); OFF(ND2_ADAPTER_INFO, AdapterId, 8);
OFF(ND2_ADAPTER_INFO, MaxRegistrationSize, 16); OFF(ND2_ADAPTER_INFO, MaxWindowSize, 24);
OFF(ND2_ADAPTER_INFO, MaxInitiatorSge, 32); OFF(ND2_ADAPTER_INFO, MaxReceiveSge, 36);
OFF(ND2_ADAPTER_INFO, MaxReadSge, 40); OFF(ND2_ADAPTER_INFO, MaxTransferLength, 44);
OFF(ND2_ADAPTER_INFO, MaxInlineDataSize, 48); OFF(ND2_ADAPTER_INFO, MaxInboundReadLimit, 52);
OFF(ND2_ADAPTER_INFO, MaxOutboundReadLimit, 56); OFF(ND2_ADAPTER_INFO, MaxReceiveQueueDepth, 60);
OFF(ND2_ADAPTER_INFO, MaxInitiatorQueueDepth, 64);
OFF(ND2_ADAPTER_INFO, MaxSharedReceiveQueueDepth, 68);
OFF(ND2_ADAPTER_INFO, MaxCompletionQueueDepth, 72);
OFF(ND2_ADAPTER_INFO, InlineRequestThreshold, 76);
OFF(ND2_ADAPTER_INFO, LargeRequestThreshold, 80); OFF(ND2_ADAPTER_INFO, MaxCallerData, 84);
OFF(ND2_ADAPTER_INFO, MaxCalleeData, 88); OFF(ND2_ADAPTER_INFO, AdapterFlags, 92);

/* ---- ND2_ADAPTER_INFO32: 88 bytes ---- */
SIZE(ND2_ADAPTER_INFO32, 88);
OFF(ND2_ADAPTER_INFO32, AdapterId, 8); OFF(ND2_ADAPTER_INFO32, MaxRegistrationSize, 16);
OFF(ND2_ADAPTER_INFO32, MaxWindowSize, 20); OFF(ND2_ADAPTER_INFO32, MaxInitiatorSge, 24);
OFF(ND2_ADAPTER_INFO32, AdapterFlags, 84);

/* ---- ND2_RESULT: 32 bytes ---- */
SIZE(ND2_RESULT, 32); ALIGN(ND2_RESULT, 8);
OFF(ND2_RESULT, Status, 0); OFF(ND2_RESULT, BytesTransferred, 4);
OFF(ND2_RESULT, QueuePairContext, 8); OFF(ND2_RESULT, RequestContext, 16);
OFF(ND2_RESULT, RequestType, 24);

/* ---- ND2_SGE: 16 bytes ---- */
SIZE(ND2_SGE, 16); ALIGN(ND2_SGE, 8);
OFF(ND2_SGE, Buffer, 0); OFF(ND2_SGE, BufferLength, 8); OFF(ND2_SGE, MemoryRegionToken, 12);

/* ---- ND v1 ---- */
SIZE(ND_ADAPTER_INFO1, 128); SIZE(ND_ADAPTER_INFO, 128);
OFF(ND_ADAPTER_INFO1, VendorId, 0); OFF(ND_ADAPTER_INFO1, DeviceId, 4);
OFF(ND_ADAPTER_INFO1, MaxInboundSge, 8); OFF(ND_ADAPTER_INFO1, MaxInboundRequests, 16);
OFF(ND_ADAPTER_INFO1, MaxInboundLength, 24); OFF(ND_ADAPTER_INFO1, MaxOutboundSge, 32);
OFF(ND_ADAPTER_INFO1, MaxOutboundRequests, 40); OFF(ND_ADAPTER_INFO1, MaxOutboundLength, 48);
OFF(ND_ADAPTER_INFO1, MaxInlineData, 56); OFF(ND_ADAPTER_INFO1, MaxInboundReadLimit, 64);
OFF(ND_ADAPTER_INFO1, MaxOutboundReadLimit, 72); OFF(ND_ADAPTER_INFO1, MaxCqEntries, 80);
OFF(ND_ADAPTER_INFO1, MaxRegistrationSize, 88); OFF(ND_ADAPTER_INFO1, MaxWindowSize, 96);
OFF(ND_ADAPTER_INFO1, LargeRequestThreshold, 104); OFF(ND_ADAPTER_INFO1, MaxCallerData, 112);
OFF(ND_ADAPTER_INFO1, MaxCalleeData, 120);
SIZE(ND_RESULT, 16); OFF(ND_RESULT, Status, 0); OFF(ND_RESULT, BytesTransferred, 8);
SIZE(ND_MW_DESCRIPTOR, 20); ALIGN(ND_MW_DESCRIPTOR, 1);
OFF(ND_MW_DESCRIPTOR, Base, 0); OFF(ND_MW_DESCRIPTOR, Length, 8); OFF(ND_MW_DESCRIPTOR, Token, 16);
SIZE(ND_SGE, 24); OFF(ND_SGE, pAddr, 0); OFF(ND_SGE, Length, 8); OFF(ND_SGE, hMr, 16);

/* ---- OVERLAPPED: 32 bytes, and OVERLAPPED_ENTRY: 32 bytes ---- */
SIZE(OVERLAPPED, 32); ALIGN(OVERLAPPED, 8);
OFF(OVERLAPPED, Internal, 0); OFF(OVERLAPPED, InternalHigh, 8);
OFF(OVERLAPPED, Offset, 16); OFF(OVERLAPPED, OffsetHigh, 20); OFF(OVERLAPPED, Pointer, 16);
OFF(OVERLAPPED, hEvent, 24);
SIZE(OVERLAPPED_ENTRY, 32);
OFF(OVERLAPPED_ENTRY, lpCompletionKey, 0); OFF(OVERLAPPED_ENTRY, lpOverlapped, 8);
OFF(OVERLAPPED_ENTRY, Internal, 16); OFF(OVERLAPPED_ENTRY, dwNumberOfBytesTransferred, 24);

/* ---- socket addresses ---- */
SIZE(SOCKET_ADDRESS, 16);
OFF(SOCKET_ADDRESS, lpSockaddr, 0); OFF(SOCKET_ADDRESS, iSockaddrLength, 8);
SIZE(SOCKET_ADDRESS_LIST, 24);
OFF(SOCKET_ADDRESS_LIST, iAddressCount, 0); OFF(SOCKET_ADDRESS_LIST, Address, 8);
SIZE(SOCKADDR_IN, 16); SIZE(SOCKADDR_IN6, 28); SIZE(SOCKADDR_STORAGE, 128);
SIZE(SOCKADDR_INET, 28); OFF(SOCKADDR_INET, si_family, 0);
OFF(SOCKADDR_IN, sin_family, 0); OFF(SOCKADDR_IN, sin_port, 2); OFF(SOCKADDR_IN, sin_addr, 4);
OFF(SOCKADDR_IN6, sin6_port, 2); OFF(SOCKADDR_IN6, sin6_addr, 8); OFF(SOCKADDR_IN6, sin6_scope_id, 24);

/* ---- other Win32 structures ---- */
SIZE(LARGE_INTEGER, 8); OFF(LARGE_INTEGER, LowPart, 0); OFF(LARGE_INTEGER, HighPart, 4);
OFF(LARGE_INTEGER, QuadPart, 0);
SIZE(ULARGE_INTEGER, 8);
SIZE(FILETIME, 8); OFF(FILETIME, dwHighDateTime, 4);
SIZE(SYSTEM_INFO, 48); OFF(SYSTEM_INFO, dwPageSize, 4);
OFF(SYSTEM_INFO, lpMinimumApplicationAddress, 8); OFF(SYSTEM_INFO, dwActiveProcessorMask, 24);
OFF(SYSTEM_INFO, dwNumberOfProcessors, 32); OFF(SYSTEM_INFO, wProcessorRevision, 46);
SIZE(SECURITY_ATTRIBUTES, 24);
SIZE(WSADATA, 408); OFF(WSADATA, lpVendorInfo, 8); OFF(WSADATA, szDescription, 16);
OFF(WSADATA, szSystemStatus, 273);
