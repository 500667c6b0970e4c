/*
 * ndstatus.h - NetworkDirect status codes.
 *
 * The 44 codes of Microsoft's ndstatus.mc (see "NetworkDirect SPI" and the
 * IND2Overlapped page of Microsoft's NetworkDirect documentation), written
 * the way the message compiler writes them: ((HRESULT)0x...).  The cast
 * matters on Linux: an uncast 0xC0000005 is a positive 64-bit `long`, so
 * `hr == 0xC0000005` would never be true.  With the cast every code is a
 * 32-bit HRESULT, negative for warnings and errors, and usable in `case`
 * labels.
 *
 * Each ND code has the value of the NTSTATUS of the same meaning
 * (ND_CANCELED == STATUS_CANCELLED, ...).  Severity is the top two bits:
 * ND_TIMEOUT and ND_PENDING are successes; ND_BUFFER_OVERFLOW,
 * ND_DEVICE_BUSY and ND_NO_MORE_ENTRIES are warnings, and FAILED() is true
 * for them.
 */
#ifndef _NDSTATUS_
#define _NDSTATUS_
#ifndef NDSTATUS_H
#define NDSTATUS_H

#include "win32/ndw_types.h"

#define ND_SUCCESS                  ((HRESULT)0x00000000)
#define ND_TIMEOUT                  ((HRESULT)0x00000102)
#define ND_PENDING                  ((HRESULT)0x00000103)
#define ND_BUFFER_OVERFLOW          ((HRESULT)0x80000005)
#define ND_DEVICE_BUSY              ((HRESULT)0x80000011)
#define ND_NO_MORE_ENTRIES          ((HRESULT)0x8000001A)
#define ND_UNSUCCESSFUL             ((HRESULT)0xC0000001)
#define ND_ACCESS_VIOLATION         ((HRESULT)0xC0000005)
#define ND_INVALID_HANDLE           ((HRESULT)0xC0000008)
#define ND_INVALID_DEVICE_REQUEST   ((HRESULT)0xC0000010)
#define ND_INVALID_PARAMETER        ((HRESULT)0xC000000D)
#define ND_NO_MEMORY                ((HRESULT)0xC0000017)
#define ND_INVALID_PARAMETER_MIX    ((HRESULT)0xC0000030)
#define ND_DATA_OVERRUN             ((HRESULT)0xC000003C)
#define ND_SHARING_VIOLATION        ((HRESULT)0xC0000043)
#define ND_INSUFFICIENT_RESOURCES   ((HRESULT)0xC000009A)
#define ND_DEVICE_NOT_READY         ((HRESULT)0xC00000A3)
#define ND_IO_TIMEOUT               ((HRESULT)0xC00000B5)
#define ND_NOT_SUPPORTED            ((HRESULT)0xC00000BB)
#define ND_INTERNAL_ERROR           ((HRESULT)0xC00000E5)
#define ND_INVALID_PARAMETER_1      ((HRESULT)0xC00000EF)
#define ND_INVALID_PARAMETER_2      ((HRESULT)0xC00000F0)
#define ND_INVALID_PARAMETER_3      ((HRESULT)0xC00000F1)
#define ND_INVALID_PARAMETER_4      ((HRESULT)0xC00000F2)
#define ND_INVALID_PARAMETER_5      ((HRESULT)0xC00000F3)
#define ND_INVALID_PARAMETER_6      ((HRESULT)0xC00000F4)
#define ND_INVALID_PARAMETER_7      ((HRESULT)0xC00000F5)
#define ND_INVALID_PARAMETER_8      ((HRESULT)0xC00000F6)
#define ND_INVALID_PARAMETER_9      ((HRESULT)0xC00000F7)
#define ND_INVALID_PARAMETER_10     ((HRESULT)0xC00000F8)
#define ND_CANCELED                 ((HRESULT)0xC0000120)
#define ND_REMOTE_ERROR             ((HRESULT)0xC000013D)
#define ND_INVALID_ADDRESS          ((HRESULT)0xC0000141)
#define ND_INVALID_DEVICE_STATE     ((HRESULT)0xC0000184)
#define ND_INVALID_BUFFER_SIZE      ((HRESULT)0xC0000206)
#define ND_TOO_MANY_ADDRESSES       ((HRESULT)0xC0000209)
#define ND_ADDRESS_ALREADY_EXISTS   ((HRESULT)0xC000020A)
#define ND_CONNECTION_REFUSED       ((HRESULT)0xC0000236)
#define ND_CONNECTION_INVALID       ((HRESULT)0xC000023A)
#define ND_CONNECTION_ACTIVE        ((HRESULT)0xC000023B)
#define ND_NETWORK_UNREACHABLE      ((HRESULT)0xC000023C)
#define ND_HOST_UNREACHABLE         ((HRESULT)0xC000023D)
#define ND_CONNECTION_ABORTED       ((HRESULT)0xC0000241)
#define ND_DEVICE_REMOVED           ((HRESULT)0xC00002B6)

#endif /* NDSTATUS_H */
#endif /* _NDSTATUS_ */
