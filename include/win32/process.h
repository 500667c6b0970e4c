/*
 * process.h - Microsoft C runtime process and thread control, for Linux.
 *
 * Part of netdirect's Win32 compatibility layer (include/win32).  ND
 * examples include it without needing anything from it; _beginthreadex is
 * provided on top of CreateThread for programs that do use it (its start
 * routine has CreateThread's ABI: unsigned (*)(void *)).
 */
#ifndef _INC_PROCESS
#define _INC_PROCESS

#include "windows.h"

NDW_QUIET_BEGIN
typedef unsigned(__stdcall *_beginthreadex_proc_type)(void *);

static inline uintptr_t _beginthreadex(void *security, unsigned stack_size,
                                       _beginthreadex_proc_type start_address,
                                       void *arglist, unsigned initflag,
                                       unsigned *thrdaddr)
{
    return (uintptr_t)CreateThread((LPSECURITY_ATTRIBUTES)security, stack_size,
                                   start_address, arglist, initflag, thrdaddr);
}
static inline int _getpid(void) { return (int)getpid(); }
NDW_QUIET_END

#endif /* _INC_PROCESS */
