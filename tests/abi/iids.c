/*
 * iids.c - every IID's bytes.  This file defines INITGUID, so <ndspi.h>
 * defines the IIDs here (as weak symbols); each is printed in registry form
 * and compared with its documented text (gen_iids.inc), which also checks
 * the GUID layout (Data1..Data3 little-endian, Data4 as bytes).
 * iids_cpp.cpp does the same in C++; both are linked into one program with
 * ndw_stub.c, whose IID_IUnknown is a strong definition as the library's
 * are, to show that weak INITGUID copies coexist with each other and with
 * the library's.
 */
#define INITGUID
#include <windows.h>
#include <ndspi.h>
#include <stdio.h>
#include <string.h>

int ndabi_iids_cpp(void);

static int check(const GUID *g, const char *name, const char *text)
{
    char buf[40];
    unsigned char raw[16];
    snprintf(buf, sizeof(buf), "%08X-%04X-%04X-%02X%02X-%02X%02X%02X%02X%02X%02X",
             (unsigned)g->Data1, (unsigned)g->Data2, (unsigned)g->Data3, g->Data4[0],
             g->Data4[1], g->Data4[2], g->Data4[3], g->Data4[4], g->Data4[5], g->Data4[6],
             g->Data4[7]);
    if (strcmp(buf, text) != 0) {
        fprintf(stderr, "iids.c: %s is {%s}, expected {%s}\n", name, buf, text);
        return 1;
    }
    /* In memory: Data1 low byte first, as on Windows. */
    memcpy(raw, g, 16);
    if (raw[0] != (unsigned char)(g->Data1 & 0xff) || raw[3] != (unsigned char)(g->Data1 >> 24) ||
        raw[4] != (unsigned char)(g->Data2 & 0xff) || raw[8] != g->Data4[0]) {
        fprintf(stderr, "iids.c: %s has the wrong byte order\n", name);
        return 1;
    }
    return 0;
}

int main(void)
{
    int bad = 0;
#define IID_CASE(name, text) bad += check(&name, #name, text);
#include "gen_iids.inc"
    if (!IsEqualIID(&IID_INDMemoryWindow, &IID_IND2MemoryWindow)) {
        fprintf(stderr, "iids.c: IID_INDMemoryWindow must equal IID_IND2MemoryWindow\n");
        bad++;
    }
    if (IsEqualGUID(&IID_IND2Adapter, &IID_IND2Connector)) {
        fprintf(stderr, "iids.c: IsEqualGUID compares nothing\n");
        bad++;
    }
    bad += ndabi_iids_cpp();
    if (bad)
        return 1;
    printf("iids: ok\n");
    return 0;
}
