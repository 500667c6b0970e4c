/*
 * tmain_other.c - a second translation unit that includes <tchar.h> (and
 * so carries the entry trampoline but no main).  Linked with tmain_main.c
 * (weak main from there) or realmain.c (the program's own main wins).
 */
#include <windows.h>
#include <tchar.h>

#ifdef __cplusplus
extern "C"
#endif
int ndabi_other_tu(void)
{
    return (int)_tcslen(_T("seven!!"));
}
