"""Expected ND interface table for tests/abi: every interface of ndspi.h
(ND v2 and v1) with its methods in vtable order, and every IID.

Written from the NetworkDirect SPI documentation (vtable order of each
IND2* page, the v1 "HPC Pack 2008 SDK" interfaces) and used by
gen_tests.py to generate the slot and IID checks.  Slot i of an interface
is the i-th entry of its method list.
"""

# (name, base, [(ret, method, params)]) ; params as C text without This
UNK = [("HRESULT","QueryInterface","REFIID riid, void **ppvObject"),
       ("ULONG","AddRef",""),("ULONG","Release","")]
OV2 = UNK + [("HRESULT","CancelOverlappedRequests",""),
             ("HRESULT","GetOverlappedResult","OVERLAPPED *pOverlapped, BOOL wait")]
OV1 = UNK + [("HRESULT","CancelOverlappedRequests",""),
             ("HRESULT","GetOverlappedResult","OVERLAPPED *pOverlapped, SIZE_T *pNumberOfBytesTransferred, BOOL bWait")]
V2 = [
 ("IND2Overlapped","IUnknown", OV2),
 ("IND2CompletionQueue","IND2Overlapped", OV2 + [
   ("HRESULT","GetNotifyAffinity","USHORT *pGroup, KAFFINITY *pAffinity"),
   ("HRESULT","Resize","ULONG queueDepth"),
   ("HRESULT","Notify","ULONG type, OVERLAPPED *pOverlapped"),
   ("ULONG","GetResults","ND2_RESULT results[], ULONG nResults")]),
 ("IND2SharedReceiveQueue","IND2Overlapped", OV2 + [
   ("HRESULT","GetNotifyAffinity","USHORT *pGroup, KAFFINITY *pAffinity"),
   ("HRESULT","Modify","ULONG queueDepth, ULONG notifyThreshold"),
   ("HRESULT","Notify","OVERLAPPED *pOverlapped"),
   ("HRESULT","Receive","void *requestContext, const ND2_SGE sge[], ULONG nSge")]),
 ("IND2MemoryWindow","IUnknown", UNK + [("UINT32","GetRemoteToken","")]),
 ("IND2MemoryRegion","IND2Overlapped", OV2 + [
   ("HRESULT","Register","const void *pBuffer, SIZE_T cbBuffer, ULONG flags, OVERLAPPED *pOverlapped"),
   ("HRESULT","Deregister","OVERLAPPED *pOverlapped"),
   ("UINT32","GetLocalToken",""),
   ("UINT32","GetRemoteToken","")]),
 ("IND2QueuePair","IUnknown", UNK + [
   ("HRESULT","Flush",""),
   ("HRESULT","Send","void *requestContext, const ND2_SGE sge[], ULONG nSge, ULONG flags"),
   ("HRESULT","Receive","void *requestContext, const ND2_SGE sge[], ULONG nSge"),
   ("HRESULT","Bind","void *requestContext, IUnknown *pMemoryRegion, IUnknown *pMemoryWindow, const void *pBuffer, SIZE_T cbBuffer, ULONG flags"),
   ("HRESULT","Invalidate","void *requestContext, IUnknown *pMemoryWindow, ULONG flags"),
   ("HRESULT","Read","void *requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress, UINT32 remoteToken, ULONG flags"),
   ("HRESULT","Write","void *requestContext, const ND2_SGE sge[], ULONG nSge, UINT64 remoteAddress, UINT32 remoteToken, ULONG flags")]),
 ("IND2Connector","IND2Overlapped", OV2 + [
   ("HRESULT","Bind","const struct sockaddr *pAddress, ULONG cbAddress"),
   ("HRESULT","Connect","IUnknown *pQueuePair, const struct sockaddr *pDestAddress, ULONG cbDestAddress, ULONG inboundReadLimit, ULONG outboundReadLimit, const void *pPrivateData, ULONG cbPrivateData, OVERLAPPED *pOverlapped"),
   ("HRESULT","CompleteConnect","OVERLAPPED *pOverlapped"),
   ("HRESULT","Accept","IUnknown *pQueuePair, ULONG inboundReadLimit, ULONG outboundReadLimit, const void *pPrivateData, ULONG cbPrivateData, OVERLAPPED *pOverlapped"),
   ("HRESULT","Reject","const void *pPrivateData, ULONG cbPrivateData"),
   ("HRESULT","GetReadLimits","ULONG *pInboundReadLimit, ULONG *pOutboundReadLimit"),
   ("HRESULT","GetPrivateData","void *pPrivateData, ULONG *pcbPrivateData"),
   ("HRESULT","GetLocalAddress","struct sockaddr *pAddress, ULONG *pcbAddress"),
   ("HRESULT","GetPeerAddress","struct sockaddr *pAddress, ULONG *pcbAddress"),
   ("HRESULT","NotifyDisconnect","OVERLAPPED *pOverlapped"),
   ("HRESULT","Disconnect","OVERLAPPED *pOverlapped")]),
 ("IND2Listener","IND2Overlapped", OV2 + [
   ("HRESULT","Bind","const struct sockaddr *pAddress, ULONG cbAddress"),
   ("HRESULT","Listen","ULONG backlog"),
   ("HRESULT","GetLocalAddress","struct sockaddr *pAddress, ULONG *pcbAddress"),
   ("HRESULT","GetConnectionRequest","IUnknown *pConnector, OVERLAPPED *pOverlapped")]),
 ("IND2Adapter","IUnknown", UNK + [
   ("HRESULT","CreateOverlappedFile","HANDLE *phOverlappedFile"),
   ("HRESULT","Query","ND2_ADAPTER_INFO *pInfo, ULONG *pcbInfo"),
   ("HRESULT","QueryAddressList","SOCKET_ADDRESS_LIST *pAddressList, ULONG *pcbAddressList"),
   ("HRESULT","CreateCompletionQueue","REFIID iid, HANDLE hOverlappedFile, ULONG queueDepth, USHORT group, KAFFINITY affinity, void **ppCompletionQueue"),
   ("HRESULT","CreateMemoryRegion","REFIID iid, HANDLE hOverlappedFile, void **ppMemoryRegion"),
   ("HRESULT","CreateMemoryWindow","REFIID iid, void **ppMemoryWindow"),
   ("HRESULT","CreateSharedReceiveQueue","REFIID iid, HANDLE hOverlappedFile, ULONG queueDepth, ULONG maxRequestSge, ULONG notifyThreshold, USHORT group, KAFFINITY affinity, void **ppSharedReceiveQueue"),
   ("HRESULT","CreateQueuePair","REFIID iid, IUnknown *pReceiveCompletionQueue, IUnknown *pInitiatorCompletionQueue, void *context, ULONG receiveQueueDepth, ULONG initiatorQueueDepth, ULONG maxReceiveRequestSge, ULONG maxInitiatorRequestSge, ULONG inlineDataSize, void **ppQueuePair"),
   ("HRESULT","CreateQueuePairWithSrq","REFIID iid, IUnknown *pReceiveCompletionQueue, IUnknown *pInitiatorCompletionQueue, IUnknown *pSharedReceiveQueue, void *context, ULONG initiatorQueueDepth, ULONG maxInitiatorRequestSge, ULONG inlineDataSize, void **ppQueuePair"),
   ("HRESULT","CreateConnector","REFIID iid, HANDLE hOverlappedFile, void **ppConnector"),
   ("HRESULT","CreateListener","REFIID iid, HANDLE hOverlappedFile, void **ppListener")]),
 ("IND2Provider","IUnknown", UNK + [
   ("HRESULT","QueryAddressList","SOCKET_ADDRESS_LIST *pAddressList, ULONG *pcbAddressList"),
   ("HRESULT","ResolveAddress","const struct sockaddr *pAddress, ULONG cbAddress, UINT64 *pAdapterId"),
   ("HRESULT","OpenAdapter","REFIID iid, UINT64 adapterId, void **ppAdapter")]),
]
V1 = [
 ("INDOverlapped","IUnknown", OV1),
 ("INDCompletionQueue","INDOverlapped", OV1 + [
   ("HRESULT","Resize","SIZE_T nEntries"),
   ("HRESULT","Notify","DWORD Type, OVERLAPPED *pOverlapped"),
   ("SIZE_T","GetResults","ND_RESULT *pResults[], SIZE_T nResults")]),
 ("INDMemoryWindow","IUnknown", UNK),
 ("INDEndpoint","IUnknown", UNK + [
   ("HRESULT","Flush",""),
   ("void","StartRequestBatch",""),
   ("void","SubmitRequestBatch",""),
   ("HRESULT","Send","ND_RESULT *pResult, const ND_SGE *pSgl, SIZE_T nSge, DWORD Flags"),
   ("HRESULT","SendAndInvalidate","ND_RESULT *pResult, const ND_SGE *pSgl, SIZE_T nSge, const ND_MW_DESCRIPTOR *pRemoteMwDescriptor, DWORD Flags"),
   ("HRESULT","Receive","ND_RESULT *pResult, const ND_SGE *pSgl, SIZE_T nSge"),
   ("HRESULT","Bind","ND_RESULT *pResult, ND_MR_HANDLE hMr, INDMemoryWindow *pMw, const void *pBuffer, SIZE_T BufferSize, DWORD Flags, ND_MW_DESCRIPTOR *pMwDescriptor"),
   ("HRESULT","Invalidate","ND_RESULT *pResult, INDMemoryWindow *pMw, DWORD Flags"),
   ("HRESULT","Read","ND_RESULT *pResult, const ND_SGE *pSgl, SIZE_T nSge, const ND_MW_DESCRIPTOR *pRemoteMwDescriptor, ULONGLONG Offset, DWORD Flags"),
   ("HRESULT","Write","ND_RESULT *pResult, const ND_SGE *pSgl, SIZE_T nSge, const ND_MW_DESCRIPTOR *pRemoteMwDescriptor, ULONGLONG Offset, DWORD Flags")]),
 ("INDConnector","INDOverlapped", OV1 + [
   ("HRESULT","CreateEndpoint","INDCompletionQueue *pInboundCq, INDCompletionQueue *pOutboundCq, SIZE_T nInboundEntries, SIZE_T nOutboundEntries, SIZE_T nInboundSge, SIZE_T nOutboundSge, SIZE_T InboundReadLimit, SIZE_T OutboundReadLimit, SIZE_T *pMaxInlineData, INDEndpoint **ppEndpoint"),
   ("HRESULT","Connect","INDEndpoint *pEndpoint, const struct sockaddr *pAddress, SIZE_T AddressLength, INT Protocol, USHORT LocalPort, const void *pPrivateData, SIZE_T PrivateDataLength, OVERLAPPED *pOverlapped"),
   ("HRESULT","CompleteConnect","OVERLAPPED *pOverlapped"),
   ("HRESULT","Accept","INDEndpoint *pEndpoint, const void *pPrivateData, SIZE_T PrivateDataLength, OVERLAPPED *pOverlapped"),
   ("HRESULT","Reject","const void *pPrivateData, SIZE_T PrivateDataLength"),
   ("HRESULT","GetConnectionData","SIZE_T *pInboundReadLimit, SIZE_T *pOutboundReadLimit, void *pPrivateData, SIZE_T *pPrivateDataLength"),
   ("HRESULT","GetLocalAddress","struct sockaddr *pAddress, SIZE_T *pAddressLength"),
   ("HRESULT","GetPeerAddress","struct sockaddr *pAddress, SIZE_T *pAddressLength"),
   ("HRESULT","NotifyDisconnect","OVERLAPPED *pOverlapped"),
   ("HRESULT","Disconnect","OVERLAPPED *pOverlapped")]),
 ("INDListen","INDOverlapped", OV1 + [
   ("HRESULT","GetConnectionRequest","INDConnector *pConnector, OVERLAPPED *pOverlapped")]),
 ("INDAdapter","INDOverlapped", OV1 + [
   ("HANDLE","GetFileHandle",""),
   ("HRESULT","Query","DWORD VersionRequested, ND_ADAPTER_INFO1 *pInfo, SIZE_T *pBufferSize"),
   ("HRESULT","Control","DWORD IoControlCode, const void *pInBuffer, SIZE_T InBufferSize, void *pOutBuffer, SIZE_T OutBufferSize, SIZE_T *pBytesReturned, OVERLAPPED *pOverlapped"),
   ("HRESULT","CreateCompletionQueue","SIZE_T nEntries, INDCompletionQueue **ppCq"),
   ("HRESULT","RegisterMemory","const void *pBuffer, SIZE_T BufferSize, OVERLAPPED *pOverlapped, ND_MR_HANDLE *phMr"),
   ("HRESULT","DeregisterMemory","ND_MR_HANDLE hMr, OVERLAPPED *pOverlapped"),
   ("HRESULT","CreateMemoryWindow","ND_RESULT *pInvalidateResult, INDMemoryWindow **ppMw"),
   ("HRESULT","CreateConnector","INDConnector **ppConnector"),
   ("HRESULT","Listen","SIZE_T Backlog, INT Protocol, USHORT Port, USHORT *pAssignedPort, INDListen **ppListen")]),
 ("INDProvider","IUnknown", UNK + [
   ("HRESULT","QueryAddressList","SOCKET_ADDRESS_LIST *pAddressList, SIZE_T *pBufferSize"),
   ("HRESULT","OpenAdapter","const struct sockaddr *pAddress, SIZE_T AddressLength, INDAdapter **ppAdapter")]),
]
SLOTS = {"IND2Overlapped":5,"IND2CompletionQueue":9,"IND2SharedReceiveQueue":9,"IND2MemoryWindow":4,"IND2MemoryRegion":9,
 "IND2QueuePair":10,"IND2Connector":16,"IND2Listener":9,"IND2Adapter":14,"IND2Provider":6,
 "INDOverlapped":5,"INDCompletionQueue":8,"INDMemoryWindow":3,"INDEndpoint":13,"INDConnector":15,"INDListen":6,"INDAdapter":14,"INDProvider":5}
for _n, _b, _m in V2 + V1:
    assert len(_m) == SLOTS[_n], (_n, len(_m))
IIDS = [
 ("IID_IND2Overlapped","ABF72719-B016-4A40-A6F7-622791A7044C"),
 ("IID_IND2CompletionQueue","20CC445E-64A0-4CBB-AA75-F6A7251FDA9E"),
 ("IID_IND2SharedReceiveQueue","AABD67DC-459A-4DB1-826B-56CFCC278883"),
 ("IID_IND2MemoryWindow","070FE1F5-0AB5-4361-88DB-974BA704D4B9"),
 ("IID_IND2MemoryRegion","55DFEA2F-BC56-4982-8A45-0301BE46C413"),
 ("IID_IND2QueuePair","EEF2F332-B75D-4063-BCE3-3A0BAD2D02CE"),
 ("IID_IND2Connector","7DD615C4-6B4C-4866-950C-F3B1D25A5302"),
 ("IID_IND2Listener","65D23D83-3A57-4E02-86A4-350165C2D130"),
 ("IID_IND2Adapter","D89C798C-4823-4D69-846C-DFDCCFF9E5F3"),
 ("IID_IND2Provider","49EAE6C1-76C4-46D0-8003-5C2EAA2C9A8E"),
 ("IID_INDOverlapped","C859E15E-75E2-4FE3-8D6D-0DFF36F02442"),
 ("IID_INDCompletionQueue","1245A633-2A32-473A-830C-E05D1F869D02"),
 ("IID_INDMemoryWindow","070FE1F5-0AB5-4361-88DB-974BA704D4B9"),
 ("IID_INDEndpoint","DBD00EAB-B679-44A9-BD65-E82F3DE12D1A"),
 ("IID_INDConnector","1BCAF2D1-E274-4AEB-AC57-CD5D4376E0B7"),
 ("IID_INDListen","BB902588-BA3F-4441-9FE1-3B6795E4E668"),
 ("IID_INDAdapter","A023C5A0-5B73-43BC-8D20-33AA07E9510F"),
 ("IID_INDProvider","0C5DD316-5FDF-47E6-B2D0-2A6EDA8D39DD"),
]
def guid_args(g):
    p = g.split('-'); d4 = p[3]+p[4]
    bs = ", ".join("0x%s" % d4[i:i+2].lower() for i in range(0,16,2))
    return "0x%s, 0x%s, 0x%s,\n            %s" % (p[0].lower(), p[1].lower(), p[2].lower(), bs)
