/*
 * layout.cpp - C++ checks of the ND and Win32 ABI: the same compile-time
 * checks as layout.c (layout_common.h), the types that must be the same C++
 * types as on Windows (SIZE_T is size_t, LONGLONG is long long ...), and,
 * at run time, the vtable slot of every method of every v2 and v1
 * interface in the C++ form, read from its pointer to member function
 * (gen_slots_cpp.inc).  Itanium C++ ABI 2.3: a pointer to a virtual member
 * function holds 1 + the byte offset of its vtable entry (on ARM: the
 * offset, with the virtual flag in the adjustment's low bit).  Together
 * with layout.c this shows the C++ and C forms put every method in the
 * same slot.
 */
#include <ntstatus.h>
#define WIN32_NO_STATUS
#include <windows.h>
#include <ndspi.h>
#include <ndsupport.h>
#include <cstdio>
#include <cstring>
#include <type_traits>

#define SA(cond, msg) static_assert(cond, msg)
#define NDABI_ALIGNOF(type) alignof(type)
#include "layout_common.h"

/* Same C++ types as on 64-bit Windows, where these are all typedefs of each other. */
SA((std::is_same<SIZE_T, size_t>::value), "SIZE_T is size_t");
SA((std::is_same<ULONG_PTR, uintptr_t>::value), "ULONG_PTR is uintptr_t");
SA((std::is_same<LONG_PTR, intptr_t>::value), "LONG_PTR is intptr_t");
SA((std::is_same<LONGLONG, long long>::value), "LONGLONG is long long");
SA((std::is_same<ULONGLONG, unsigned long long>::value), "ULONGLONG is unsigned long long");
SA((std::is_same<REFIID, const GUID &>::value), "REFIID is a reference");
SA((std::is_same<decltype(ND_SUCCESS), HRESULT>::value), "status codes are HRESULT");
SA((std::is_same<DWORD, unsigned int>::value), "DWORD is 32-bit unsigned int");
SA((std::is_same<WCHAR, wchar_t>::value), "WCHAR is wchar_t");

/* No virtual destructor anywhere: that would add Itanium vtable entries. */
SA(!std::has_virtual_destructor<IUnknown>::value, "IUnknown has no virtual destructor");
SA(!std::has_virtual_destructor<IND2Connector>::value, "no virtual destructor");
SA(std::is_polymorphic<IND2Adapter>::value && std::is_abstract<IND2Adapter>::value,
   "interfaces are abstract classes");
SA(sizeof(IND2Connector) == sizeof(void *), "one vtable pointer");
SA((std::is_base_of<IND2Overlapped, IND2Connector>::value), "IND2Connector : IND2Overlapped");
SA((std::is_base_of<IUnknown, IND2QueuePair>::value), "IND2QueuePair : IUnknown");
SA(!(std::is_base_of<IND2Overlapped, IND2Adapter>::value), "IND2Adapter is not overlapped");
SA((std::is_base_of<INDOverlapped, INDAdapter>::value), "INDAdapter : INDOverlapped");

static int bad;

/* The vtable slot of a virtual member function, or -1. */
template <class F>
static long slot_of(F pm)
{
    struct {
        uintptr_t ptr;
        ptrdiff_t adj;
    } rep;
    static_assert(sizeof(pm) == sizeof(rep), "Itanium member pointer is two words");
    std::memcpy(&rep, &pm, sizeof(rep));
#if defined(__arm__) || defined(__aarch64__)
    if ((rep.adj & 1) == 0)
        return -1;
    return (long)(rep.ptr / sizeof(void *));
#else
    if (rep.adj != 0 || (rep.ptr & 1) == 0)
        return -1;
    return (long)((rep.ptr - 1) / sizeof(void *));
#endif
}

#define CHECK_SLOT(iface, method, slot) \
    do { \
        long got = slot_of(&iface::method); \
        if (got != (slot)) { \
            std::fprintf(stderr, "layout.cpp: %s::%s is in slot %ld, expected %d\n", \
                         #iface, #method, got, (slot)); \
            bad++; \
        } \
    } while (0)

int main()
{
#include "gen_slots_cpp.inc"
    CHECK_SLOT(IUnknown, QueryInterface, 0);
    CHECK_SLOT(IUnknown, AddRef, 1);
    CHECK_SLOT(IUnknown, Release, 2);
    CHECK_SLOT(IClassFactory, CreateInstance, 3);
    CHECK_SLOT(IClassFactory, LockServer, 4);
    if (bad) {
        std::fprintf(stderr, "layout.cpp: %d slot(s) wrong\n", bad);
        return 1;
    }
    std::printf("layout.cpp: ok\n");
    return 0;
}
