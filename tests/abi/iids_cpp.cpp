/*
 * iids_cpp.cpp - the C++ side of iids.c: INITGUID definitions in a C++
 * translation unit (extern "C", weak), REFIID as a reference, and
 * IsEqualIID / operator== / operator!= by value.
 */
#define INITGUID
#include <windows.h>
#include <ndspi.h>
#include <cstdio>

static bool accepts(REFIID riid)
{
    return riid == IID_IND2Adapter || IsEqualIID(riid, IID_IUnknown);
}

extern "C" int ndabi_iids_cpp(void)
{
    int bad = 0;
    GUID copy = IID_IND2Adapter; /* equal by value, not by address */
    if (!accepts(copy) || !accepts(IID_IUnknown) || accepts(IID_IND2Provider)) {
        std::fprintf(stderr, "iids_cpp: REFIID comparison is wrong\n");
        bad++;
    }
    if (IID_INDMemoryWindow != IID_IND2MemoryWindow || !(IID_INDAdapter != IID_IND2Adapter)) {
        std::fprintf(stderr, "iids_cpp: operator== / != is wrong\n");
        bad++;
    }
    if (IID_IClassFactory.Data1 != 1 || IID_IUnknown.Data4[7] != 0x46) {
        std::fprintf(stderr, "iids_cpp: standard COM IIDs are wrong\n");
        bad++;
    }
    return bad;
}
