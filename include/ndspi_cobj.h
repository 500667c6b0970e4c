/*
 * ndspi_cobj.h - C call helpers for the ndspi.h interfaces, in the style
 * MIDL generates under COBJMACROS: `IND2Adapter_Query(p, &info, &cb)`
 * expands to `p->lpVtbl->Query(p, &info, &cb)`.
 *
 * Included by <ndspi.h> when COBJMACROS is defined and the C interface
 * form is in use (C, or C++ with CINTERFACE).  Not meant to be included
 * directly.
 */
#ifndef NDSPI_COBJ_H
#define NDSPI_COBJ_H

/* IUnknown: works on any ND object, e.g. IUnknown_Release((IUnknown *)pQp). */
#define IUnknown_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define IUnknown_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define IUnknown_Release(This) \
    ((This)->lpVtbl->Release(This))
/* IClassFactory */
#define IClassFactory_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define IClassFactory_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define IClassFactory_Release(This) \
    ((This)->lpVtbl->Release(This))
#define IClassFactory_CreateInstance(This, pUnkOuter, riid, ppvObject) \
    ((This)->lpVtbl->CreateInstance(This, pUnkOuter, riid, ppvObject))
#define IClassFactory_LockServer(This, fLock) \
    ((This)->lpVtbl->LockServer(This, fLock))
/* IND2Overlapped */
#define IND2Overlapped_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define IND2Overlapped_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define IND2Overlapped_Release(This) \
    ((This)->lpVtbl->Release(This))
#define IND2Overlapped_CancelOverlappedRequests(This) \
    ((This)->lpVtbl->CancelOverlappedRequests(This))
#define IND2Overlapped_GetOverlappedResult(This, pOverlapped, wait) \
    ((This)->lpVtbl->GetOverlappedResult(This, pOverlapped, wait))
/* IND2CompletionQueue */
#define IND2CompletionQueue_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define IND2CompletionQueue_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define IND2CompletionQueue_Release(This) \
    ((This)->lpVtbl->Release(This))
#define IND2CompletionQueue_CancelOverlappedRequests(This) \
    ((This)->lpVtbl->CancelOverlappedRequests(This))
#define IND2CompletionQueue_GetOverlappedResult(This, pOverlapped, wait) \
    ((This)->lpVtbl->GetOverlappedResult(This, pOverlapped, wait))
#define IND2CompletionQueue_GetNotifyAffinity(This, pGroup, pAffinity) \
    ((This)->lpVtbl->GetNotifyAffinity(This, pGroup, pAffinity))
#define IND2CompletionQueue_Resize(This, queueDepth) \
    ((This)->lpVtbl->Resize(This, queueDepth))
#define IND2CompletionQueue_Notify(This, type, pOverlapped) \
    ((This)->lpVtbl->Notify(This, type, pOverlapped))
#define IND2CompletionQueue_GetResults(This, results, nResults) \
    ((This)->lpVtbl->GetResults(This, results, nResults))
/* IND2SharedReceiveQueue */
#define IND2SharedReceiveQueue_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define IND2SharedReceiveQueue_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define IND2SharedReceiveQueue_Release(This) \
    ((This)->lpVtbl->Release(This))
#define IND2SharedReceiveQueue_CancelOverlappedRequests(This) \
    ((This)->lpVtbl->CancelOverlappedRequests(This))
#define IND2SharedReceiveQueue_GetOverlappedResult(This, pOverlapped, wait) \
    ((This)->lpVtbl->GetOverlappedResult(This, pOverlapped, wait))
#define IND2SharedReceiveQueue_GetNotifyAffinity(This, pGroup, pAffinity) \
    ((This)->lpVtbl->GetNotifyAffinity(This, pGroup, pAffinity))
#define IND2SharedReceiveQueue_Modify(This, queueDepth, notifyThreshold) \
    ((This)->lpVtbl->Modify(This, queueDepth, notifyThreshold))
#define IND2SharedReceiveQueue_Notify(This, pOverlapped) \
    ((This)->lpVtbl->Notify(This, pOverlapped))
#define IND2SharedReceiveQueue_Receive(This, requestContext, sge, nSge) \
    ((This)->lpVtbl->Receive(This, requestContext, sge, nSge))
/* IND2MemoryWindow */
#define IND2MemoryWindow_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define IND2MemoryWindow_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define IND2MemoryWindow_Release(This) \
    ((This)->lpVtbl->Release(This))
#define IND2MemoryWindow_GetRemoteToken(This) \
    ((This)->lpVtbl->GetRemoteToken(This))
/* IND2MemoryRegion */
#define IND2MemoryRegion_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define IND2MemoryRegion_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define IND2MemoryRegion_Release(This) \
    ((This)->lpVtbl->Release(This))
#define IND2MemoryRegion_CancelOverlappedRequests(This) \
    ((This)->lpVtbl->CancelOverlappedRequests(This))
#define IND2MemoryRegion_GetOverlappedResult(This, pOverlapped, wait) \
    ((This)->lpVtbl->GetOverlappedResult(This, pOverlapped, wait))
#define IND2MemoryRegion_Register(This, pBuffer, cbBuffer, flags, pOverlapped) \
    ((This)->lpVtbl->Register(This, pBuffer, cbBuffer, flags, pOverlapped))
#define IND2MemoryRegion_Deregister(This, pOverlapped) \
    ((This)->lpVtbl->Deregister(This, pOverlapped))
#define IND2MemoryRegion_GetLocalToken(This) \
    ((This)->lpVtbl->GetLocalToken(This))
#define IND2MemoryRegion_GetRemoteToken(This) \
    ((This)->lpVtbl->GetRemoteToken(This))
/* IND2QueuePair */
#define IND2QueuePair_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define IND2QueuePair_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define IND2QueuePair_Release(This) \
    ((This)->lpVtbl->Release(This))
#define IND2QueuePair_Flush(This) \
    ((This)->lpVtbl->Flush(This))
#define IND2QueuePair_Send(This, requestContext, sge, nSge, flags) \
    ((This)->lpVtbl->Send(This, requestContext, sge, nSge, flags))
#define IND2QueuePair_Receive(This, requestContext, sge, nSge) \
    ((This)->lpVtbl->Receive(This, requestContext, sge, nSge))
#define IND2QueuePair_Bind(This, requestContext, pMemoryRegion, pMemoryWindow, pBuffer, cbBuffer, flags) \
    ((This)->lpVtbl->Bind(This, requestContext, pMemoryRegion, pMemoryWindow, pBuffer, cbBuffer, flags))
#define IND2QueuePair_Invalidate(This, requestContext, pMemoryWindow, flags) \
    ((This)->lpVtbl->Invalidate(This, requestContext, pMemoryWindow, flags))
#define IND2QueuePair_Read(This, requestContext, sge, nSge, remoteAddress, remoteToken, flags) \
    ((This)->lpVtbl->Read(This, requestContext, sge, nSge, remoteAddress, remoteToken, flags))
#define IND2QueuePair_Write(This, requestContext, sge, nSge, remoteAddress, remoteToken, flags) \
    ((This)->lpVtbl->Write(This, requestContext, sge, nSge, remoteAddress, remoteToken, flags))
/* IND2Connector */
#define IND2Connector_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define IND2Connector_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define IND2Connector_Release(This) \
    ((This)->lpVtbl->Release(This))
#define IND2Connector_CancelOverlappedRequests(This) \
    ((This)->lpVtbl->CancelOverlappedRequests(This))
#define IND2Connector_GetOverlappedResult(This, pOverlapped, wait) \
    ((This)->lpVtbl->GetOverlappedResult(This, pOverlapped, wait))
#define IND2Connector_Bind(This, pAddress, cbAddress) \
    ((This)->lpVtbl->Bind(This, pAddress, cbAddress))
#define IND2Connector_Connect(This, pQueuePair, pDestAddress, cbDestAddress, inboundReadLimit, outboundReadLimit, pPrivateData, cbPrivateData, pOverlapped) \
    ((This)->lpVtbl->Connect(This, pQueuePair, pDestAddress, cbDestAddress, inboundReadLimit, outboundReadLimit, pPrivateData, cbPrivateData, pOverlapped))
#define IND2Connector_CompleteConnect(This, pOverlapped) \
    ((This)->lpVtbl->CompleteConnect(This, pOverlapped))
#define IND2Connector_Accept(This, pQueuePair, inboundReadLimit, outboundReadLimit, pPrivateData, cbPrivateData, pOverlapped) \
    ((This)->lpVtbl->Accept(This, pQueuePair, inboundReadLimit, outboundReadLimit, pPrivateData, cbPrivateData, pOverlapped))
#define IND2Connector_Reject(This, pPrivateData, cbPrivateData) \
    ((This)->lpVtbl->Reject(This, pPrivateData, cbPrivateData))
#define IND2Connector_GetReadLimits(This, pInboundReadLimit, pOutboundReadLimit) \
    ((This)->lpVtbl->GetReadLimits(This, pInboundReadLimit, pOutboundReadLimit))
#define IND2Connector_GetPrivateData(This, pPrivateData, pcbPrivateData) \
    ((This)->lpVtbl->GetPrivateData(This, pPrivateData, pcbPrivateData))
#define IND2Connector_GetLocalAddress(This, pAddress, pcbAddress) \
    ((This)->lpVtbl->GetLocalAddress(This, pAddress, pcbAddress))
#define IND2Connector_GetPeerAddress(This, pAddress, pcbAddress) \
    ((This)->lpVtbl->GetPeerAddress(This, pAddress, pcbAddress))
#define IND2Connector_NotifyDisconnect(This, pOverlapped) \
    ((This)->lpVtbl->NotifyDisconnect(This, pOverlapped))
#define IND2Connector_Disconnect(This, pOverlapped) \
    ((This)->lpVtbl->Disconnect(This, pOverlapped))
/* IND2Listener */
#define IND2Listener_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define IND2Listener_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define IND2Listener_Release(This) \
    ((This)->lpVtbl->Release(This))
#define IND2Listener_CancelOverlappedRequests(This) \
    ((This)->lpVtbl->CancelOverlappedRequests(This))
#define IND2Listener_GetOverlappedResult(This, pOverlapped, wait) \
    ((This)->lpVtbl->GetOverlappedResult(This, pOverlapped, wait))
#define IND2Listener_Bind(This, pAddress, cbAddress) \
    ((This)->lpVtbl->Bind(This, pAddress, cbAddress))
#define IND2Listener_Listen(This, backlog) \
    ((This)->lpVtbl->Listen(This, backlog))
#define IND2Listener_GetLocalAddress(This, pAddress, pcbAddress) \
    ((This)->lpVtbl->GetLocalAddress(This, pAddress, pcbAddress))
#define IND2Listener_GetConnectionRequest(This, pConnector, pOverlapped) \
    ((This)->lpVtbl->GetConnectionRequest(This, pConnector, pOverlapped))
/* IND2Adapter */
#define IND2Adapter_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define IND2Adapter_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define IND2Adapter_Release(This) \
    ((This)->lpVtbl->Release(This))
#define IND2Adapter_CreateOverlappedFile(This, phOverlappedFile) \
    ((This)->lpVtbl->CreateOverlappedFile(This, phOverlappedFile))
#define IND2Adapter_Query(This, pInfo, pcbInfo) \
    ((This)->lpVtbl->Query(This, pInfo, pcbInfo))
#define IND2Adapter_QueryAddressList(This, pAddressList, pcbAddressList) \
    ((This)->lpVtbl->QueryAddressList(This, pAddressList, pcbAddressList))
#define IND2Adapter_CreateCompletionQueue(This, iid, hOverlappedFile, queueDepth, group, affinity, ppCompletionQueue) \
    ((This)->lpVtbl->CreateCompletionQueue(This, iid, hOverlappedFile, queueDepth, group, affinity, ppCompletionQueue))
#define IND2Adapter_CreateMemoryRegion(This, iid, hOverlappedFile, ppMemoryRegion) \
    ((This)->lpVtbl->CreateMemoryRegion(This, iid, hOverlappedFile, ppMemoryRegion))
#define IND2Adapter_CreateMemoryWindow(This, iid, ppMemoryWindow) \
    ((This)->lpVtbl->CreateMemoryWindow(This, iid, ppMemoryWindow))
#define IND2Adapter_CreateSharedReceiveQueue(This, iid, hOverlappedFile, queueDepth, maxRequestSge, notifyThreshold, group, affinity, ppSharedReceiveQueue) \
    ((This)->lpVtbl->CreateSharedReceiveQueue(This, iid, hOverlappedFile, queueDepth, maxRequestSge, notifyThreshold, group, affinity, ppSharedReceiveQueue))
#define IND2Adapter_CreateQueuePair(This, iid, pReceiveCompletionQueue, pInitiatorCompletionQueue, context, receiveQueueDepth, initiatorQueueDepth, maxReceiveRequestSge, maxInitiatorRequestSge, inlineDataSize, ppQueuePair) \
    ((This)->lpVtbl->CreateQueuePair(This, iid, pReceiveCompletionQueue, pInitiatorCompletionQueue, context, receiveQueueDepth, initiatorQueueDepth, maxReceiveRequestSge, maxInitiatorRequestSge, inlineDataSize, ppQueuePair))
#define IND2Adapter_CreateQueuePairWithSrq(This, iid, pReceiveCompletionQueue, pInitiatorCompletionQueue, pSharedReceiveQueue, context, initiatorQueueDepth, maxInitiatorRequestSge, inlineDataSize, ppQueuePair) \
    ((This)->lpVtbl->CreateQueuePairWithSrq(This, iid, pReceiveCompletionQueue, pInitiatorCompletionQueue, pSharedReceiveQueue, context, initiatorQueueDepth, maxInitiatorRequestSge, inlineDataSize, ppQueuePair))
#define IND2Adapter_CreateConnector(This, iid, hOverlappedFile, ppConnector) \
    ((This)->lpVtbl->CreateConnector(This, iid, hOverlappedFile, ppConnector))
#define IND2Adapter_CreateListener(This, iid, hOverlappedFile, ppListener) \
    ((This)->lpVtbl->CreateListener(This, iid, hOverlappedFile, ppListener))
/* IND2Provider */
#define IND2Provider_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define IND2Provider_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define IND2Provider_Release(This) \
    ((This)->lpVtbl->Release(This))
#define IND2Provider_QueryAddressList(This, pAddressList, pcbAddressList) \
    ((This)->lpVtbl->QueryAddressList(This, pAddressList, pcbAddressList))
#define IND2Provider_ResolveAddress(This, pAddress, cbAddress, pAdapterId) \
    ((This)->lpVtbl->ResolveAddress(This, pAddress, cbAddress, pAdapterId))
#define IND2Provider_OpenAdapter(This, iid, adapterId, ppAdapter) \
    ((This)->lpVtbl->OpenAdapter(This, iid, adapterId, ppAdapter))
/* INDOverlapped */
#define INDOverlapped_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define INDOverlapped_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define INDOverlapped_Release(This) \
    ((This)->lpVtbl->Release(This))
#define INDOverlapped_CancelOverlappedRequests(This) \
    ((This)->lpVtbl->CancelOverlappedRequests(This))
#define INDOverlapped_GetOverlappedResult(This, pOverlapped, pNumberOfBytesTransferred, bWait) \
    ((This)->lpVtbl->GetOverlappedResult(This, pOverlapped, pNumberOfBytesTransferred, bWait))
/* INDCompletionQueue */
#define INDCompletionQueue_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define INDCompletionQueue_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define INDCompletionQueue_Release(This) \
    ((This)->lpVtbl->Release(This))
#define INDCompletionQueue_CancelOverlappedRequests(This) \
    ((This)->lpVtbl->CancelOverlappedRequests(This))
#define INDCompletionQueue_GetOverlappedResult(This, pOverlapped, pNumberOfBytesTransferred, bWait) \
    ((This)->lpVtbl->GetOverlappedResult(This, pOverlapped, pNumberOfBytesTransferred, bWait))
#define INDCompletionQueue_Resize(This, nEntries) \
    ((This)->lpVtbl->Resize(This, nEntries))
#define INDCompletionQueue_Notify(This, Type, pOverlapped) \
    ((This)->lpVtbl->Notify(This, Type, pOverlapped))
#define INDCompletionQueue_GetResults(This, pResults, nResults) \
    ((This)->lpVtbl->GetResults(This, pResults, nResults))
/* INDMemoryWindow */
#define INDMemoryWindow_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define INDMemoryWindow_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define INDMemoryWindow_Release(This) \
    ((This)->lpVtbl->Release(This))
/* INDEndpoint */
#define INDEndpoint_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define INDEndpoint_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define INDEndpoint_Release(This) \
    ((This)->lpVtbl->Release(This))
#define INDEndpoint_Flush(This) \
    ((This)->lpVtbl->Flush(This))
#define INDEndpoint_StartRequestBatch(This) \
    ((This)->lpVtbl->StartRequestBatch(This))
#define INDEndpoint_SubmitRequestBatch(This) \
    ((This)->lpVtbl->SubmitRequestBatch(This))
#define INDEndpoint_Send(This, pResult, pSgl, nSge, Flags) \
    ((This)->lpVtbl->Send(This, pResult, pSgl, nSge, Flags))
#define INDEndpoint_SendAndInvalidate(This, pResult, pSgl, nSge, pRemoteMwDescriptor, Flags) \
    ((This)->lpVtbl->SendAndInvalidate(This, pResult, pSgl, nSge, pRemoteMwDescriptor, Flags))
#define INDEndpoint_Receive(This, pResult, pSgl, nSge) \
    ((This)->lpVtbl->Receive(This, pResult, pSgl, nSge))
#define INDEndpoint_Bind(This, pResult, hMr, pMw, pBuffer, BufferSize, Flags, pMwDescriptor) \
    ((This)->lpVtbl->Bind(This, pResult, hMr, pMw, pBuffer, BufferSize, Flags, pMwDescriptor))
#define INDEndpoint_Invalidate(This, pResult, pMw, Flags) \
    ((This)->lpVtbl->Invalidate(This, pResult, pMw, Flags))
#define INDEndpoint_Read(This, pResult, pSgl, nSge, pRemoteMwDescriptor, Offset, Flags) \
    ((This)->lpVtbl->Read(This, pResult, pSgl, nSge, pRemoteMwDescriptor, Offset, Flags))
#define INDEndpoint_Write(This, pResult, pSgl, nSge, pRemoteMwDescriptor, Offset, Flags) \
    ((This)->lpVtbl->Write(This, pResult, pSgl, nSge, pRemoteMwDescriptor, Offset, Flags))
/* INDConnector */
#define INDConnector_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define INDConnector_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define INDConnector_Release(This) \
    ((This)->lpVtbl->Release(This))
#define INDConnector_CancelOverlappedRequests(This) \
    ((This)->lpVtbl->CancelOverlappedRequests(This))
#define INDConnector_GetOverlappedResult(This, pOverlapped, pNumberOfBytesTransferred, bWait) \
    ((This)->lpVtbl->GetOverlappedResult(This, pOverlapped, pNumberOfBytesTransferred, bWait))
#define INDConnector_CreateEndpoint(This, pInboundCq, pOutboundCq, nInboundEntries, nOutboundEntries, nInboundSge, nOutboundSge, InboundReadLimit, OutboundReadLimit, pMaxInlineData, ppEndpoint) \
    ((This)->lpVtbl->CreateEndpoint(This, pInboundCq, pOutboundCq, nInboundEntries, nOutboundEntries, nInboundSge, nOutboundSge, InboundReadLimit, OutboundReadLimit, pMaxInlineData, ppEndpoint))
#define INDConnector_Connect(This, pEndpoint, pAddress, AddressLength, Protocol, LocalPort, pPrivateData, PrivateDataLength, pOverlapped) \
    ((This)->lpVtbl->Connect(This, pEndpoint, pAddress, AddressLength, Protocol, LocalPort, pPrivateData, PrivateDataLength, pOverlapped))
#define INDConnector_CompleteConnect(This, pOverlapped) \
    ((This)->lpVtbl->CompleteConnect(This, pOverlapped))
#define INDConnector_Accept(This, pEndpoint, pPrivateData, PrivateDataLength, pOverlapped) \
    ((This)->lpVtbl->Accept(This, pEndpoint, pPrivateData, PrivateDataLength, pOverlapped))
#define INDConnector_Reject(This, pPrivateData, PrivateDataLength) \
    ((This)->lpVtbl->Reject(This, pPrivateData, PrivateDataLength))
#define INDConnector_GetConnectionData(This, pInboundReadLimit, pOutboundReadLimit, pPrivateData, pPrivateDataLength) \
    ((This)->lpVtbl->GetConnectionData(This, pInboundReadLimit, pOutboundReadLimit, pPrivateData, pPrivateDataLength))
#define INDConnector_GetLocalAddress(This, pAddress, pAddressLength) \
    ((This)->lpVtbl->GetLocalAddress(This, pAddress, pAddressLength))
#define INDConnector_GetPeerAddress(This, pAddress, pAddressLength) \
    ((This)->lpVtbl->GetPeerAddress(This, pAddress, pAddressLength))
#define INDConnector_NotifyDisconnect(This, pOverlapped) \
    ((This)->lpVtbl->NotifyDisconnect(This, pOverlapped))
#define INDConnector_Disconnect(This, pOverlapped) \
    ((This)->lpVtbl->Disconnect(This, pOverlapped))
/* INDListen */
#define INDListen_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define INDListen_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define INDListen_Release(This) \
    ((This)->lpVtbl->Release(This))
#define INDListen_CancelOverlappedRequests(This) \
    ((This)->lpVtbl->CancelOverlappedRequests(This))
#define INDListen_GetOverlappedResult(This, pOverlapped, pNumberOfBytesTransferred, bWait) \
    ((This)->lpVtbl->GetOverlappedResult(This, pOverlapped, pNumberOfBytesTransferred, bWait))
#define INDListen_GetConnectionRequest(This, pConnector, pOverlapped) \
    ((This)->lpVtbl->GetConnectionRequest(This, pConnector, pOverlapped))
/* INDAdapter */
#define INDAdapter_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define INDAdapter_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define INDAdapter_Release(This) \
    ((This)->lpVtbl->Release(This))
#define INDAdapter_CancelOverlappedRequests(This) \
    ((This)->lpVtbl->CancelOverlappedRequests(This))
#define INDAdapter_GetOverlappedResult(This, pOverlapped, pNumberOfBytesTransferred, bWait) \
    ((This)->lpVtbl->GetOverlappedResult(This, pOverlapped, pNumberOfBytesTransferred, bWait))
#define INDAdapter_GetFileHandle(This) \
    ((This)->lpVtbl->GetFileHandle(This))
#define INDAdapter_Query(This, VersionRequested, pInfo, pBufferSize) \
    ((This)->lpVtbl->Query(This, VersionRequested, pInfo, pBufferSize))
#define INDAdapter_Control(This, IoControlCode, pInBuffer, InBufferSize, pOutBuffer, OutBufferSize, pBytesReturned, pOverlapped) \
    ((This)->lpVtbl->Control(This, IoControlCode, pInBuffer, InBufferSize, pOutBuffer, OutBufferSize, pBytesReturned, pOverlapped))
#define INDAdapter_CreateCompletionQueue(This, nEntries, ppCq) \
    ((This)->lpVtbl->CreateCompletionQueue(This, nEntries, ppCq))
#define INDAdapter_RegisterMemory(This, pBuffer, BufferSize, pOverlapped, phMr) \
    ((This)->lpVtbl->RegisterMemory(This, pBuffer, BufferSize, pOverlapped, phMr))
#define INDAdapter_DeregisterMemory(This, hMr, pOverlapped) \
    ((This)->lpVtbl->DeregisterMemory(This, hMr, pOverlapped))
#define INDAdapter_CreateMemoryWindow(This, pInvalidateResult, ppMw) \
    ((This)->lpVtbl->CreateMemoryWindow(This, pInvalidateResult, ppMw))
#define INDAdapter_CreateConnector(This, ppConnector) \
    ((This)->lpVtbl->CreateConnector(This, ppConnector))
#define INDAdapter_Listen(This, Backlog, Protocol, Port, pAssignedPort, ppListen) \
    ((This)->lpVtbl->Listen(This, Backlog, Protocol, Port, pAssignedPort, ppListen))
/* INDProvider */
#define INDProvider_QueryInterface(This, riid, ppvObject) \
    ((This)->lpVtbl->QueryInterface(This, riid, ppvObject))
#define INDProvider_AddRef(This) \
    ((This)->lpVtbl->AddRef(This))
#define INDProvider_Release(This) \
    ((This)->lpVtbl->Release(This))
#define INDProvider_QueryAddressList(This, pAddressList, pBufferSize) \
    ((This)->lpVtbl->QueryAddressList(This, pAddressList, pBufferSize))
#define INDProvider_OpenAdapter(This, pAddress, AddressLength, ppAdapter) \
    ((This)->lpVtbl->OpenAdapter(This, pAddress, AddressLength, ppAdapter))

#endif /* NDSPI_COBJ_H */
