/*
 * ndw_stub_iids.c - the IID data symbols libnetdirect exports, for the test
 * double ndw_stub.c: <initguid.h> makes <ndspi.h>'s DEFINE_GUIDs define
 * every IID_IND2* and IID_IND* (weak definitions, like a client's own).
 */
#include <initguid.h>
#include <ndspi.h>
