/*
 * ndw_com.h - GUIDs, DEFINE_GUID and the COM interface macros
 * (DECLARE_INTERFACE_, STDMETHOD, THIS_, PURE ...) with IUnknown and
 * IClassFactory, for Linux.
 *
 * Internal header of netdirect's Win32 compatibility layer, included by
 * <ndspi.h> and by <unknwn.h>, <objbase.h>, <guiddef.h> and <initguid.h>.
 * It follows Microsoft's documentation of guiddef.h (GUID, DEFINE_GUID,
 * IsEqualGUID), of IUnknown and IClassFactory, and of the "C++ and C
 * interface" conventions of objbase.h.  See docs/PORTING.md.
 *
 * One header declares every interface for both languages:
 *  - C++: an abstract struct with pure virtual methods and single public
 *    inheritance.  Under the Itanium C++ ABI (g++, clang) that gives one
 *    vtable pointer at offset 0 and slots in declaration order; methods that
 *    a derived interface re-declares with the same signature reuse the base
 *    slot.
 *  - C (or C++ with CINTERFACE defined): `struct I { const IVtbl *lpVtbl; }`
 *    and `struct IVtbl` with one function pointer per method, `This` first.
 *  Both describe the same memory, so a C client, a C++ client and the Rust
 *  implementation agree slot for slot.
 *
 * There is NO virtual destructor, on purpose: Itanium gives a virtual
 * destructor two vtable entries, which would shift every later slot by two
 * (the mistake DirectXShaderCompiler's first Linux IUnknown made).  COM
 * objects are destroyed by Release().  -Wnon-virtual-dtor is silenced
 * locally around the declarations for that reason.
 */
#ifndef NDW_COM_H
#define NDW_COM_H

#include "ndw_types.h"

/* ---- GUID (guiddef.h): 16 bytes, align 4, little-endian fields --------- */

typedef struct _GUID {
    UINT32 Data1;
    UINT16 Data2;
    UINT16 Data3;
    UINT8 Data4[8];
} GUID, *LPGUID, *PGUID;
typedef GUID IID, CLSID, FMTID;
typedef IID *LPIID;
typedef CLSID *LPCLSID;

/* A reference in C++, a pointer in C: either way a pointer in the ABI. */
#ifdef __cplusplus
#define REFGUID const GUID &
#define REFIID const IID &
#define REFCLSID const IID &
#define REFFMTID const IID &
#else
#define REFGUID const GUID *
#define REFIID const IID *
#define REFCLSID const IID *
#define REFFMTID const IID *
#endif

/* Equality compares the 16 bytes, never the addresses. */
#ifdef __cplusplus
NDW_QUIET_BEGIN
inline int InlineIsEqualGUID(REFGUID a, REFGUID b)
{
    return memcmp(&a, &b, sizeof(GUID)) == 0;
}
inline int IsEqualGUID(REFGUID a, REFGUID b)
{
    return memcmp(&a, &b, sizeof(GUID)) == 0;
}
inline bool operator==(REFGUID a, REFGUID b) { return IsEqualGUID(a, b) != 0; }
inline bool operator!=(REFGUID a, REFGUID b) { return IsEqualGUID(a, b) == 0; }
NDW_QUIET_END
#else
#define InlineIsEqualGUID(a, b) (memcmp((a), (b), sizeof(GUID)) == 0)
#define IsEqualGUID(a, b) (memcmp((a), (b), sizeof(GUID)) == 0)
#endif
#define IsEqualIID(a, b) IsEqualGUID(a, b)
#define IsEqualCLSID(a, b) IsEqualGUID(a, b)

/* ---- interface macros (objbase.h conventions) --------------------------- */

#if defined(__cplusplus) && !defined(CINTERFACE)

#define STDMETHOD(method) virtual HRESULT STDMETHODCALLTYPE method
#define STDMETHOD_(type, method) virtual type STDMETHODCALLTYPE method
#define STDMETHODV(method) virtual HRESULT STDMETHODVCALLTYPE method
#define STDMETHODV_(type, method) virtual type STDMETHODVCALLTYPE method
#define PURE = 0
#define THIS_
#define THIS void
#define DECLARE_INTERFACE(iface) struct DECLSPEC_NOVTABLE iface
#define DECLARE_INTERFACE_(iface, baseiface) \
    struct DECLSPEC_NOVTABLE iface : public baseiface
#define DECLARE_INTERFACE_IID(iface, iid) DECLARE_INTERFACE(iface)
#define DECLARE_INTERFACE_IID_(iface, baseiface, iid) \
    DECLARE_INTERFACE_(iface, baseiface)

#else /* C, or C++ with CINTERFACE */

#define STDMETHOD(method) HRESULT(STDMETHODCALLTYPE *method)
#define STDMETHOD_(type, method) type(STDMETHODCALLTYPE *method)
#define STDMETHODV(method) HRESULT(STDMETHODVCALLTYPE *method)
#define STDMETHODV_(type, method) type(STDMETHODVCALLTYPE *method)
#define PURE
/* `INTERFACE` names the interface being declared (set before each one). */
#define THIS_ INTERFACE *This,
#define THIS INTERFACE *This
/*
 * The object is a struct whose only member is the vtable pointer; the
 * vtable is a struct of function pointers whose body follows the macro.
 * The base interface is not used: each interface repeats its base's methods
 * in order, which is also why the C++ form re-declares them.
 */
#define DECLARE_INTERFACE(iface) \
    typedef struct iface iface; \
    typedef struct iface##Vtbl iface##Vtbl; \
    struct iface { \
        const iface##Vtbl *lpVtbl; \
    }; \
    struct iface##Vtbl
#define DECLARE_INTERFACE_(iface, baseiface) DECLARE_INTERFACE(iface)
#define DECLARE_INTERFACE_IID(iface, iid) DECLARE_INTERFACE(iface)
#define DECLARE_INTERFACE_IID_(iface, baseiface, iid) DECLARE_INTERFACE(iface)

#endif

#define IFACEMETHOD(method) STDMETHOD(method)
#define IFACEMETHOD_(type, method) STDMETHOD_(type, method)
#define STDMETHODIMP HRESULT STDMETHODCALLTYPE
#define STDMETHODIMP_(type) type STDMETHODCALLTYPE
#define IFACEMETHODIMP STDMETHODIMP
#define IFACEMETHODIMP_(type) STDMETHODIMP_(type)
#define STDAPI EXTERN_C HRESULT STDAPICALLTYPE
#define STDAPI_(type) EXTERN_C type STDAPICALLTYPE
#ifndef BEGIN_INTERFACE
#define BEGIN_INTERFACE
#endif
#ifndef END_INTERFACE
#define END_INTERFACE
#endif

/*
 * Around interface declarations, silence -Wnon-virtual-dtor (see above) and
 * -Wsuggest-override: each interface re-declares its base's methods, as
 * the C form requires, and in C++ those re-declarations are overrides.
 */
#if defined(__cplusplus) && defined(__GNUC__) && !defined(__clang__)
#define NDW_INTERFACES_BEGIN \
    _Pragma("GCC diagnostic push") \
    _Pragma("GCC diagnostic ignored \"-Wnon-virtual-dtor\"") \
    _Pragma("GCC diagnostic ignored \"-Wsuggest-override\"")
#define NDW_INTERFACES_END _Pragma("GCC diagnostic pop")
#elif defined(__cplusplus) && defined(__clang__)
#define NDW_INTERFACES_BEGIN \
    _Pragma("clang diagnostic push") \
    _Pragma("clang diagnostic ignored \"-Wunknown-warning-option\"") \
    _Pragma("clang diagnostic ignored \"-Wnon-virtual-dtor\"") \
    _Pragma("clang diagnostic ignored \"-Wsuggest-override\"")
#define NDW_INTERFACES_END _Pragma("clang diagnostic pop")
#elif defined(__cplusplus)
#define NDW_INTERFACES_BEGIN
#define NDW_INTERFACES_END
#else
#define NDW_INTERFACES_BEGIN
#define NDW_INTERFACES_END
#endif

/* ---- IUnknown and IClassFactory (unknwn.h) ------------------------------ */

NDW_INTERFACES_BEGIN

#undef INTERFACE
#define INTERFACE IUnknown
DECLARE_INTERFACE(IUnknown)
{
    BEGIN_INTERFACE
    /* slot 0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /* slot 1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /* slot 2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    END_INTERFACE
};
#undef INTERFACE
typedef IUnknown *LPUNKNOWN;

#define INTERFACE IClassFactory
DECLARE_INTERFACE_(IClassFactory, IUnknown)
{
    BEGIN_INTERFACE
    /* IUnknown */
    STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* slot 3 */ STDMETHOD(CreateInstance)(THIS_ IUnknown *pUnkOuter, REFIID riid,
                                           void **ppvObject) PURE;
    /* slot 4 */ STDMETHOD(LockServer)(THIS_ BOOL fLock) PURE;
    END_INTERFACE
};
#undef INTERFACE
typedef IClassFactory *LPCLASSFACTORY;

NDW_INTERFACES_END

#endif /* NDW_COM_H */

/*
 * DEFINE_GUID is (re)evaluated on every inclusion, outside the include
 * guard, as Microsoft's guiddef.h does: with INITGUID defined it defines the
 * GUID, otherwise it declares it.  libnetdirect exports every IID_IND2*,
 * IID_IND*, IID_IUnknown and IID_IClassFactory as data, so ordinary clients
 * only need the declarations.  A client that defines INITGUID gets its own
 * copies; they are weak (the ELF analogue of __declspec(selectany)) so they
 * coexist with the library's and with each other.
 */
#undef DEFINE_GUID
#ifdef INITGUID
#ifdef __cplusplus
#define DEFINE_GUID(name, l, w1, w2, b1, b2, b3, b4, b5, b6, b7, b8) \
    extern "C" const GUID DECLSPEC_SELECTANY name = \
        {l, w1, w2, {b1, b2, b3, b4, b5, b6, b7, b8}}
#else
#define DEFINE_GUID(name, l, w1, w2, b1, b2, b3, b4, b5, b6, b7, b8) \
    const GUID DECLSPEC_SELECTANY name = {l, w1, w2, {b1, b2, b3, b4, b5, b6, b7, b8}}
#endif
#else
#define DEFINE_GUID(name, l, w1, w2, b1, b2, b3, b4, b5, b6, b7, b8) \
    EXTERN_C const GUID name
#endif

#ifndef NDW_COM_IIDS
#define NDW_COM_IIDS
/* {00000000-0000-0000-C000-000000000046} */
DEFINE_GUID(IID_IUnknown, 0x00000000, 0x0000, 0x0000,
            0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46);
/* {00000001-0000-0000-C000-000000000046} */
DEFINE_GUID(IID_IClassFactory, 0x00000001, 0x0000, 0x0000,
            0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46);
#endif
