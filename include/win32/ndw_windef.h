/*
 * ndw_windef.h - the macros of windef.h/winnt.h/minwindef.h that Windows
 * programs use: calling-convention names, VOID/CONST/FAR/NEAR/IN/OUT,
 * __declspec, `interface`, CONTAINING_RECORD, FIELD_OFFSET,
 * UNREFERENCED_PARAMETER, C_ASSERT, MAKEWORD/LOWORD/HIWORD.
 *
 * Internal header of netdirect's Win32 compatibility layer, included by the
 * Windows-named headers in include/win32 but not by <ndspi.h>: these names
 * are ordinary identifiers to Linux code (libusb has a member called
 * `interface`), so a Linux program that includes only the ND headers does
 * not get them.  Definitions follow Microsoft's "Windows Data Types" and
 * winnt.h documentation.
 */
#ifndef NDW_WINDEF_H
#define NDW_WINDEF_H

#include "ndw_types.h"

/*
 * Calling conventions: all empty.  64-bit Windows has one convention, and
 * g++ would warn that the stdcall attribute is ignored on x86-64.
 */
#ifndef __cdecl
#define __cdecl
#endif
#ifndef __stdcall
#define __stdcall
#endif
#ifndef __fastcall
#define __fastcall
#endif
#ifndef WINAPI
#define WINAPI
#endif
#ifndef WINAPIV
#define WINAPIV
#endif
#ifndef APIENTRY
#define APIENTRY
#endif
#ifndef CALLBACK
#define CALLBACK
#endif
#ifndef NTAPI
#define NTAPI
#endif
#ifndef WSAAPI
#define WSAAPI
#endif
#ifndef FAR
#define FAR
#endif
#ifndef NEAR
#define NEAR
#endif
#ifndef CONST
#define CONST const
#endif
#ifndef VOID
#define VOID void
#endif
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef OPTIONAL
#define OPTIONAL
#endif

/* `interface` is `struct`, as in Microsoft's combaseapi.h. */
#ifndef interface
#define interface struct
#endif

/* MSVC storage-class extensions: all no-ops, except forceinline. */
#ifndef __declspec
#define __declspec(x)
#endif
#ifndef __forceinline
#define __forceinline inline __attribute__((__always_inline__))
#endif
#ifndef DECLSPEC_NOINLINE
#define DECLSPEC_NOINLINE __attribute__((__noinline__))
#endif
#ifndef DECLSPEC_ALIGN
#define DECLSPEC_ALIGN(x) __attribute__((__aligned__(x)))
#endif

/* ---- structure helpers -------------------------------------------------- */

/*
 * CONTAINING_RECORD is the Windows definition (address arithmetic on a null
 * pointer), not offsetof(): clients apply it to classes that are not
 * standard-layout, where offsetof() draws -Winvalid-offsetof in C++.
 */
#ifndef CONTAINING_RECORD
#define CONTAINING_RECORD(address, type, field) \
    ((type *)((PCHAR)(address) - (ULONG_PTR)(&((type *)0)->field)))
#endif
#ifndef FIELD_OFFSET
#define FIELD_OFFSET(type, field) ((LONG)(LONG_PTR) & (((type *)0)->field))
#endif
#ifndef RTL_FIELD_SIZE
#define RTL_FIELD_SIZE(type, field) (sizeof(((type *)0)->field))
#endif
#ifndef UNREFERENCED_PARAMETER
#define UNREFERENCED_PARAMETER(P) ((void)(P))
#endif
#ifndef DBG_UNREFERENCED_PARAMETER
#define DBG_UNREFERENCED_PARAMETER(P) ((void)(P))
#endif
#ifndef UNREFERENCED_LOCAL_VARIABLE
#define UNREFERENCED_LOCAL_VARIABLE(V) ((void)(V))
#endif
#ifndef C_ASSERT
#ifdef __cplusplus
#define C_ASSERT(e) static_assert((e), #e)
#else
#define C_ASSERT(e) _Static_assert((e), #e)
#endif
#endif

/* ---- small macros (minwindef.h) ------------------------------------------ */

#define MAKEWORD(a, b) \
    ((WORD)(((BYTE)(((DWORD_PTR)(a)) & 0xff)) | ((WORD)((BYTE)(((DWORD_PTR)(b)) & 0xff))) << 8))
#define MAKELONG(a, b) \
    ((LONG)(((WORD)(((DWORD_PTR)(a)) & 0xffff)) | ((DWORD)((WORD)(((DWORD_PTR)(b)) & 0xffff))) << 16))
#define LOWORD(l) ((WORD)(((DWORD_PTR)(l)) & 0xffff))
#define HIWORD(l) ((WORD)((((DWORD_PTR)(l)) >> 16) & 0xffff))
#define LOBYTE(w) ((BYTE)(((DWORD_PTR)(w)) & 0xff))
#define HIBYTE(w) ((BYTE)((((DWORD_PTR)(w)) >> 8) & 0xff))

#endif /* NDW_WINDEF_H */
