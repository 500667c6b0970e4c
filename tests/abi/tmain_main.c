/*
 * tmain_main.c - a Windows-style wide entry point.  Compiled as C and as
 * C++; check.sh runs it as `tmain -s héllo` in a UTF-8 locale and expects
 * exit status 42 and the arguments echoed through wprintf and printf.  The
 * prototype before the definition is deliberate (the _tmain macro must
 * tolerate it), and tmain_other.c is a second translation unit including
 * <tchar.h>.
 */
#include <windows.h>
#include <tchar.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C"
#endif
int ndabi_other_tu(void);

int __cdecl _tmain(int argc, TCHAR *argv[]);

int __cdecl _tmain(int argc, TCHAR *argv[])
{
    int bad = 0;
    if (argc != 3 || argv[argc] != NULL)
        bad++;
    else if (wcscmp(argv[1], L"-s") != 0 || wcscmp(argv[2], L"h\u00e9llo") != 0)
        bad++;
    if (argc >= 3)
        wprintf(L"args: %s %s\n", argv[1], argv[2]);
    printf("other=%d\n", ndabi_other_tu());
    return bad ? 1 : 42;
}
