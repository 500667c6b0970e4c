/*
 * layout_cinterface.cpp - the C (lpVtbl) form of the interfaces compiled as
 * C++ with CINTERFACE defined, as Windows allows: the same slot checks as
 * layout.c, in a C++ translation unit.
 */
#define CINTERFACE
#include <windows.h>
#include <ndspi.h>
#include <cstddef>

#define SA(cond, msg) static_assert(cond, msg)
#include "gen_slots_c.inc"

int ndabi_cinterface_ok() { return 1; }
