/*
 * ndsupport.h - NetworkDirect helper functions (provider discovery,
 * address lists, opening adapters), for Linux.
 *
 * Declares the ndutil helper API that Microsoft's NetworkDirect
 * documentation and examples use (NdStartup, NdQueryAddressList,
 * NdResolveAddress, NdOpenAdapter, ...).  libnetdirect implements these
 * with their real, unprefixed names and C linkage.  ND_HELPER_API is empty:
 * the platform C calling convention.  See docs/PORTING.md.
 */
#ifndef _NDSUPPORT_H_
#define _NDSUPPORT_H_
#ifndef NDSUPPORT_H
#define NDSUPPORT_H

#include "ndspi.h"

#ifndef ND_HELPER_API
#define ND_HELPER_API
#endif

/* NdQueryAddressList flags. */
#define ND_QUERY_EXCLUDE_EMULATOR_ADDRESSES 0x00000001 /* accepted, ignored */
#define ND_QUERY_EXCLUDE_NDv1_ADDRESSES 0x00000002
#define ND_QUERY_EXCLUDE_NDv2_ADDRESSES 0x00000004

#ifdef __cplusplus
extern "C" {
#endif

/* Reference-counted initialisation; pair each successful call with NdCleanup. */
HRESULT ND_HELPER_API NdStartup(void);

/* Drops a reference; ND_DEVICE_NOT_READY if NdStartup was not called. */
HRESULT ND_HELPER_API NdCleanup(void);

/* Unloads provider modules that are not in use. */
void ND_HELPER_API NdFlushProviders(void);

/*
 * Lists the local addresses served by ND providers.  Call with a NULL list
 * and *pcbAddressList == 0 to learn the size (ND_BUFFER_OVERFLOW); with no
 * addresses at all it returns ND_SUCCESS and *pcbAddressList == 0.  On
 * success *pcbAddressList is left unchanged, as ndutil does.
 */
HRESULT ND_HELPER_API NdQueryAddressList(DWORD flags,
                                         SOCKET_ADDRESS_LIST *pAddressList,
                                         SIZE_T *pcbAddressList);

/*
 * The local address (port 0) this host would use to reach pRemoteAddress,
 * provided an ND provider serves it.
 */
HRESULT ND_HELPER_API NdResolveAddress(const struct sockaddr *pRemoteAddress,
                                       SIZE_T cbRemoteAddress,
                                       struct sockaddr *pLocalAddress,
                                       SIZE_T *pcbLocalAddress);

/* ND_SUCCESS if some provider serves the IP of pAddress (port ignored). */
HRESULT ND_HELPER_API NdCheckAddress(const struct sockaddr *pAddress,
                                     SIZE_T cbAddress);

/*
 * Opens the adapter serving pAddress and returns the interface iid of it
 * (IID_IND2Adapter; IID_INDAdapter selects the v1 providers).
 */
HRESULT ND_HELPER_API NdOpenAdapter(REFIID iid, const struct sockaddr *pAddress,
                                    SIZE_T cbAddress, void **ppIAdapter);

/* NdOpenAdapter(IID_INDAdapter, ...) with a typed result. */
HRESULT ND_HELPER_API NdOpenV1Adapter(const struct sockaddr *pAddress,
                                      SIZE_T cbAddress, INDAdapter **ppIAdapter);

#ifdef __cplusplus
}
#endif

#endif /* NDSUPPORT_H */
#endif /* _NDSUPPORT_H_ */
