/*
 * layout.c - C checks of the ND and Win32 ABI: type widths, structure
 * sizes and offsets, status values (layout_common.h) and the vtable slot of
 * every method of every v2 and v1 interface in the C (lpVtbl) form
 * (gen_slots_c.inc).  Everything is checked at compile time; the program
 * only reports success.
 */
#include <ntstatus.h>
#define WIN32_NO_STATUS
#include <windows.h>
#include <ndspi.h>
#include <ndsupport.h>
#include <stdio.h>

#define SA(cond, msg) _Static_assert(cond, msg)
#define NDABI_ALIGNOF(type) _Alignof(type)
#include "layout_common.h"
#include "gen_slots_c.inc"

SIZE(IUnknownVtbl, 3 * sizeof(void *));
SIZE(IClassFactoryVtbl, 5 * sizeof(void *));
SA(offsetof(IClassFactoryVtbl, CreateInstance) == 3 * sizeof(void *), "CreateInstance slot");
SA(offsetof(IClassFactoryVtbl, LockServer) == 4 * sizeof(void *), "LockServer slot");

int main(void)
{
    OVERLAPPED ov;
    memset(&ov, 0, sizeof(ov));
    ov.Internal = (ULONG_PTR)(ULONG)STATUS_PENDING;
    if (HasOverlappedIoCompleted(&ov)) {
        fprintf(stderr, "layout.c: HasOverlappedIoCompleted on a pending request\n");
        return 1;
    }
    ov.Internal = (ULONG_PTR)(ULONG)ND_CANCELED; /* zero-extended, as the provider writes it */
    if (!HasOverlappedIoCompleted(&ov) || (NTSTATUS)ov.Internal != STATUS_CANCELLED) {
        fprintf(stderr, "layout.c: completed status not read back\n");
        return 1;
    }
    printf("layout.c: ok\n");
    return 0;
}
