/*
 * xcall_main.c - calls every method of every ND interface across the
 * language boundary: C code calls C++ objects through lpVtbl and C++ code
 * calls C objects (static vtables of function pointers, as libnetdirect
 * builds them) through virtual calls.  Each method returns (or records, for
 * void methods) a value unique to its interface and slot, so a method in
 * the wrong slot, a missing slot or an extra one is caught.  The generated
 * halves are gen_xcall_c.c and gen_xcall_cpp.cpp.
 */
#define COBJMACROS
#include <stdio.h>
#include "xcall.h"

int ndabi_void_code;

void ndabi_fail(const char *what) { fprintf(stderr, "xcall: wrong slot: %s\n", what); }

/* IUnknown_* helpers on an ND object seen as IUnknown (same vtable prefix). */
static int iunknown_helpers(void)
{
    IUnknown *unk = (IUnknown *)cpp_make_IND2QueuePair();
    int bad = 0;
    if (IUnknown_AddRef(unk) != (ULONG)NDABI_CODE_IND2QueuePair(1))
        bad++;
    if (IUnknown_Release(unk) != (ULONG)NDABI_CODE_IND2QueuePair(2))
        bad++;
    if (bad)
        ndabi_fail("IUnknown_AddRef/IUnknown_Release on an IND2QueuePair");
    return bad;
}

int main(void)
{
    int bad = ndabi_xcall_all() + iunknown_helpers();
    if (bad) {
        fprintf(stderr, "xcall: %d call(s) reached the wrong method\n", bad);
        return 1;
    }
    printf("xcall: ok\n");
    return 0;
}
