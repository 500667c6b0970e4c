/*
 * realmain.c - a program with its own `int main(int, char **)` in a
 * translation unit that includes <tchar.h>: it must compile (no second
 * main in this object) and its main must be the one that runs (exit 17),
 * also when linked with tmain_main.c, whose weak main must yield.
 */
#include <windows.h>
#include <tchar.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C"
#endif
int ndabi_other_tu(void);

int main(int argc, char **argv)
{
    (void)argv;
    printf("real main, argc=%d, other=%d\n", argc, ndabi_other_tu());
    return 17;
}
