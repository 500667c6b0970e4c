/*
 * sal.h - Microsoft source-code annotation language (SAL 1 and SAL 2)
 * names, all defined empty, for Linux.
 *
 * Part of netdirect's Win32 compatibility layer (include/win32), following
 * Microsoft's "Using SAL Annotations" documentation: the annotations are
 * for Microsoft's static analysers and mean nothing to gcc or clang.
 *
 * __in and __out are the exception in C++.  libstdc++ uses both as
 * parameter names (stl_pair.h, stl_algo.h ...), so empty macros defined
 * before <functional>, <map>, <string> or <algorithm> break those headers;
 * mingw-w64 leaves them undefined for C++ for the same reason.  They are
 * defined (empty) only for C.  Our own headers never use them.  A C++
 * program whose own headers use __in/__out can define ND_COMPAT_SAL_IN_OUT
 * to get them anyway, and must then include every standard C++ header
 * before the first Windows header.
 */
#ifndef NDW_SAL_H
#define NDW_SAL_H

/* __in and __out: C only (see above). */
#if !defined(__cplusplus) || defined(ND_COMPAT_SAL_IN_OUT)
#ifndef __in
#define __in
#endif
#ifndef __out
#define __out
#endif
#endif

/* SAL 1: simple annotations */
#define __inout
#define __in_opt
#define __out_opt
#define __inout_opt
#define __in_z
#define __in_z_opt
#define __out_z
#define __out_z_opt
#define __inout_z
#define __deref_out
#define __deref_out_opt
#define __deref_inout
#define __deref_inout_opt
#define __deref_opt_out
#define __deref_opt_out_opt
#define __deref_in
#define __deref_in_opt
#define __callback
#define __checkReturn
#define __nullterminated
#define __nullnullterminated
#define __format_string
#define __notnull
#define __maybenull
#define __readonly
#define __fallthrough
#define __override
#define __in_bound
#define __out_bound
#define __drv_aliasesMem
#define __drv_freesMem

/* SAL 1: sized annotations */
#define __in_bcount(x)
#define __in_bcount_opt(x)
#define __in_ecount(x)
#define __in_ecount_opt(x)
#define __in_xcount(x)
#define __in_xcount_opt(x)
#define __out_bcount(x)
#define __out_bcount_opt(x)
#define __out_ecount(x)
#define __out_ecount_opt(x)
#define __out_xcount(x)
#define __out_xcount_opt(x)
#define __out_bcount_full(x)
#define __out_ecount_full(x)
#define __out_bcount_z(x)
#define __out_ecount_z(x)
#define __out_ecount_opt_z(x)
#define __inout_bcount(x)
#define __inout_bcount_opt(x)
#define __inout_ecount(x)
#define __inout_ecount_opt(x)
#define __inout_xcount(x)
#define __deref_out_bcount(x)
#define __deref_out_ecount(x)
#define __deref_out_bcount_opt(x)
#define __deref_out_ecount_opt(x)
#define __deref_inout_bcount(x)
#define __deref_inout_ecount(x)
#define __field_bcount(x)
#define __field_ecount(x)
#define __field_bcount_opt(x)
#define __field_ecount_opt(x)
#define __field_xcount(x)
#define __bcount(x)
#define __ecount(x)
#define __bcount_opt(x)
#define __ecount_opt(x)
#define __xcount(x)
#define __success(x)
#define __analysis_assume(x)
#define __in_range(x)
#define __out_range(x)
#define __typefix(x)
#define __drv_when(x)
#define __drv_requiresIRQL(x)
#define __drv_maxIRQL(x)
#define __drv_allocatesMem(x)

/* SAL 1: two-argument annotations */
#define __out_bcount_part(x, y)
#define __out_ecount_part(x, y)
#define __out_bcount_part_opt(x, y)
#define __out_ecount_part_opt(x, y)
#define __inout_bcount_part(x, y)
#define __inout_ecount_part(x, y)
#define __inout_bcount_part_opt(x, y)
#define __inout_ecount_part_opt(x, y)
#define __deref_out_bcount_part(x, y)
#define __deref_out_ecount_part(x, y)

/* SAL 2: simple annotations */
#define _In_
#define _Out_
#define _Inout_
#define _In_opt_
#define _Out_opt_
#define _Inout_opt_
#define _In_z_
#define _In_opt_z_
#define _Inout_z_
#define _Inout_opt_z_
#define _Outptr_
#define _Outptr_opt_
#define _Outptr_result_maybenull_
#define _Outptr_opt_result_maybenull_
#define _Outptr_result_nullonfailure_
#define _Outptr_opt_result_nullonfailure_
#define _COM_Outptr_
#define _COM_Outptr_opt_
#define _COM_Outptr_result_maybenull_
#define _Ret_
#define _Ret_maybenull_
#define _Ret_notnull_
#define _Ret_z_
#define _Ret_maybenull_z_
#define _Ret_null_
#define _Ret_valid_
#define _Check_return_
#define _Must_inspect_result_
#define _Use_decl_annotations_
#define _Printf_format_string_
#define _Scanf_format_string_
#define _Null_terminated_
#define _NullNull_terminated_
#define _Reserved_
#define _Frees_ptr_
#define _Frees_ptr_opt_
#define _Pre_
#define _Post_
#define _Deref_out_
#define _Deref_out_opt_
#define _Deref_inout_
#define _Pre_notnull_
#define _Pre_maybenull_
#define _Pre_null_
#define _Post_notnull_
#define _Post_maybenull_
#define _Post_null_
#define _Post_z_
#define _Post_invalid_
#define _Post_valid_
#define _Pre_valid_
#define _Notnull_
#define _Maybenull_
#define _Null_
#define _Valid_
#define _Notvalid_
#define _Strict_type_match_
#define _Interlocked_operand_
#define _Field_z_
#define _Literal_
#define _Notliteral_
#define _Points_to_data_
#define _Analysis_noreturn_
#define _Callback_
#define _Maybe_raises_SEH_exception_
#define _Raises_SEH_exception_

/* SAL 2: sized and conditional annotations */
#define _In_reads_(...)
#define _In_reads_opt_(...)
#define _In_reads_bytes_(...)
#define _In_reads_bytes_opt_(...)
#define _In_reads_z_(...)
#define _In_reads_opt_z_(...)
#define _In_reads_or_z_(...)
#define _In_reads_to_ptr_(...)
#define _In_reads_to_ptr_opt_(...)
#define _In_range_(...)
#define _Out_range_(...)
#define _Ret_range_(...)
#define _Deref_in_range_(...)
#define _Out_writes_(...)
#define _Out_writes_opt_(...)
#define _Out_writes_bytes_(...)
#define _Out_writes_bytes_opt_(...)
#define _Out_writes_z_(...)
#define _Out_writes_opt_z_(...)
#define _Out_writes_all_(...)
#define _Out_writes_all_opt_(...)
#define _Out_writes_bytes_all_(...)
#define _Out_writes_bytes_all_opt_(...)
#define _Out_writes_to_ptr_(...)
#define _Out_writes_to_ptr_opt_(...)
#define _Inout_updates_(...)
#define _Inout_updates_opt_(...)
#define _Inout_updates_bytes_(...)
#define _Inout_updates_bytes_opt_(...)
#define _Inout_updates_z_(...)
#define _Inout_updates_opt_z_(...)
#define _Inout_updates_all_(...)
#define _Inout_updates_all_opt_(...)
#define _Inout_updates_bytes_all_(...)
#define _Inout_updates_bytes_all_opt_(...)
#define _Outptr_result_buffer_(...)
#define _Outptr_opt_result_buffer_(...)
#define _Outptr_result_bytebuffer_(...)
#define _Outptr_opt_result_bytebuffer_(...)
#define _Outptr_result_buffer_maybenull_(...)
#define _Outptr_result_bytebuffer_maybenull_(...)
#define _Ret_writes_(...)
#define _Ret_writes_bytes_(...)
#define _Ret_writes_maybenull_(...)
#define _Ret_writes_bytes_maybenull_(...)
#define _Success_(...)
#define _Return_type_success_(...)
#define _Field_size_(...)
#define _Field_size_opt_(...)
#define _Field_size_bytes_(...)
#define _Field_size_bytes_opt_(...)
#define _Field_size_full_(...)
#define _Field_size_bytes_full_(...)
#define _Field_range_(...)
#define _Analysis_assume_(...)
#define _Pre_satisfies_(...)
#define _Post_satisfies_(...)
#define _Post_equal_to_(...)
#define _Satisfies_(...)
#define _Always_(...)
#define _Acquires_lock_(...)
#define _Releases_lock_(...)
#define _Requires_lock_held_(...)
#define _Requires_lock_not_held_(...)
#define _Acquires_exclusive_lock_(...)
#define _Releases_exclusive_lock_(...)
#define _Acquires_shared_lock_(...)
#define _Releases_shared_lock_(...)
#define _Guarded_by_(...)
#define _Write_guarded_by_(...)
#define _Pre_readable_size_(...)
#define _Pre_writable_size_(...)
#define _Pre_readable_byte_size_(...)
#define _Pre_writable_byte_size_(...)
#define _Post_readable_size_(...)
#define _Post_writable_size_(...)
#define _Post_readable_byte_size_(...)
#define _Post_writable_byte_size_(...)
#define _Deref_pre_readable_size_(...)
#define _Deref_post_readable_size_(...)
#define _IRQL_requires_(...)
#define _IRQL_requires_max_(...)
#define _IRQL_requires_min_(...)
#define _IRQL_raises_(...)
#define _IRQL_saves_(...)
#define _IRQL_restores_(...)
#define _Kernel_requires_resource_held_(...)
#define _Dispatcher_type_(...)
#define _Struct_size_bytes_(...)
#define _Readable_bytes_(...)
#define _Writable_bytes_(...)
#define _Readable_elements_(...)
#define _Writable_elements_(...)

/* SAL 2: two-argument annotations */
#define _Out_writes_to_(...)
#define _Out_writes_to_opt_(...)
#define _Out_writes_bytes_to_(...)
#define _Out_writes_bytes_to_opt_(...)
#define _Inout_updates_to_(...)
#define _Inout_updates_bytes_to_(...)
#define _When_(...)
#define _At_(...)
#define _At_buffer_(...)
#define _In_reads_bytes_to_(...)
#define _Field_size_part_(...)
#define _Field_size_bytes_part_(...)
#define _Field_size_part_opt_(...)
#define _Field_size_bytes_part_opt_(...)
#define _Ret_writes_to_(...)
#define _Ret_writes_bytes_to_(...)
#define _Outptr_result_buffer_to_(...)
#define _Outptr_result_bytebuffer_to_(...)
#define _Outptr_opt_result_buffer_to_(...)
#define _Outptr_opt_result_bytebuffer_to_(...)

#endif /* NDW_SAL_H */
