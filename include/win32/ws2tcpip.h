/*
 * ws2tcpip.h - the TCP/IP part of Windows Sockets for Linux: InetPton,
 * InetNtop, ADDRINFOA, SOCKADDR_INET, plus everything in <winsock2.h>.
 *
 * Part of netdirect's Win32 compatibility layer (include/win32), following
 * Microsoft's ws2tcpip.h documentation.
 */
#ifndef _WS2TCPIP_H_
#define _WS2TCPIP_H_

#include "winsock2.h"
#include <netdb.h>

#endif /* _WS2TCPIP_H_ */
