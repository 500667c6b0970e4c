/*
 * winsock2.h - Windows Sockets 2 names for Linux: SOCKET, WSADATA,
 * WSAStartup/WSACleanup, WSAStringToAddress, closesocket, error codes, and
 * the SOCKADDR/SOCKET_ADDRESS types.
 *
 * Part of netdirect's Win32 compatibility layer (include/win32), following
 * Microsoft's Winsock2 documentation.  Sockets are Linux file descriptors
 * and socket addresses are Linux sockaddrs (AF_INET6 == 10).
 */
#ifndef _WINSOCK2API_
#define _WINSOCK2API_

#include "windows.h"

#endif /* _WINSOCK2API_ */
