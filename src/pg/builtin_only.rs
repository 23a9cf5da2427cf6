//! Whether an expression stored in the catalogs (a `pg_node_tree`: a CHECK constraint, a
//! default or generated expression, an index expression or predicate, a domain's check)
//! calls nothing but PostgreSQL's own IMMUTABLE functions. (The checks of a domain it casts
//! to are further expressions: `snowflake_id_node.row_code` lists them.)
//!
//! PostgreSQL 15's logical replication apply worker writes every row as the subscription's
//! owner, a superuser, whoever owns the table: a move onto a node of that version can make
//! no one else run a table's code. A denylist of functions cannot make that safe (setval,
//! lo_get, pg_notify, pg_terminate_backend, a text cast to regclass ... each checks only
//! whether its caller is a superuser), so what may run there is an allowlist: PostgreSQL's own
//! IMMUTABLE functions (an OID below `FirstNormalObjectId`: initdb made them), which have
//! no effect and read nothing but their arguments, and the copy's own functions and
//! sequences (in the move's schemas: create_shard made them, and no other role owns them
//! until the copies get their owners, under the fence). Everything else is named.

use pgrx::pg_sys;
use std::ffi::{c_void, CStr, CString};

/// What the walk was given and found.
struct Walk<'a> {
    schemas: &'a [pg_sys::Oid],
    found: Option<String>,
}

/// The first call or node of the expression `tree` (a `pg_node_tree`'s text) that is
/// neither an IMMUTABLE function of PostgreSQL's own nor a function or sequence of one of
/// `schemas`, described; None when there is none.
pub fn first_untrusted(tree: &[u8], schemas: &[pg_sys::Oid]) -> Option<String> {
    let Ok(tree) = CString::new(tree) else {
        return Some("an expression that cannot be read".into());
    };
    let mut walk = Walk {
        schemas,
        found: None,
    };
    // SAFETY: a node tree PostgreSQL wrote into its catalog; walked in this call's memory.
    unsafe {
        let node = pg_sys::stringToNode(tree.as_ptr()).cast::<pg_sys::Node>();
        visit(node, (&mut walk as *mut Walk).cast());
    }
    walk.found
}

/// `expression_tree_walker`'s callback: true (stop) at the first node or call not allowed.
///
/// # Safety
/// `context` is the [`Walk`] of [`first_untrusted`]; `node` a node of its tree, or NULL.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn visit(node: *mut pg_sys::Node, context: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: a valid node; the context is the walk (borrowed only while no call holds it).
    let (tag, schemas) = unsafe { ((*node).type_, (*context.cast::<Walk>()).schemas) };
    if tag == pg_sys::NodeTag::T_FuncExpr && own_nextval(node.cast(), schemas) {
        return false;
    }
    // SAFETY: a valid node; the callback's context is the walk.
    if unsafe { pg_sys::check_functions_in_node(node, Some(check_function), context) } {
        return true;
    }
    if !allowed(node, tag) {
        let kind = format!("{tag:?}");
        // SAFETY: as above.
        unsafe { &mut *context.cast::<Walk>() }.found = Some(format!(
            "an expression of kind {}",
            kind.trim_start_matches("T_")
        ));
        return true;
    }
    // SAFETY: as above.
    unsafe { pg_sys::expression_tree_walker(node, Some(visit), context) }
}

/// The node kinds that run no code besides the functions `check_functions_in_node` names
/// (or none): the forms of CHECK constraints, defaults and index expressions in common
/// use. A cast to a domain runs its checks, which the caller judges apart (the domains an
/// expression names are in pg_depend). Any other kind (NextValueExpr; XML and JSON
/// constructors; GREATEST or a subscript of a type of a role's) is named, not judged.
fn allowed(node: *mut pg_sys::Node, tag: pg_sys::NodeTag) -> bool {
    use pg_sys::NodeTag::*;
    match tag {
        T_Var
        | T_Const
        | T_FuncExpr
        | T_OpExpr
        | T_DistinctExpr
        | T_NullIfExpr
        | T_ScalarArrayOpExpr
        | T_BoolExpr
        | T_RelabelType
        | T_CoerceViaIO
        | T_ArrayCoerceExpr
        | T_CollateExpr
        | T_CaseExpr
        | T_CaseWhen
        | T_CaseTestExpr
        | T_ArrayExpr
        | T_RowExpr
        | T_RowCompareExpr
        | T_CoalesceExpr
        | T_NullTest
        | T_BooleanTest
        | T_List
        | T_FieldSelect
        | T_CoerceToDomainValue
        | T_SQLValueFunction
        | T_CoerceToDomain => true,
        // SAFETY: a MinMaxExpr, by its tag.
        T_MinMaxExpr => {
            unsafe { (*node.cast::<pg_sys::MinMaxExpr>()).minmaxtype }.to_u32()
                < pg_sys::FirstNormalObjectId
        }
        // SAFETY: a SubscriptingRef, by its tag.
        T_SubscriptingRef => {
            unsafe { (*node.cast::<pg_sys::SubscriptingRef>()).refcontainertype }.to_u32()
                < pg_sys::FirstNormalObjectId
        }
        _ => false,
    }
}

/// `nextval` of a sequence of the copy's own (a serial column's default).
fn own_nextval(call: *mut pg_sys::FuncExpr, schemas: &[pg_sys::Oid]) -> bool {
    // SAFETY: a FuncExpr, by its tag; its arguments a List of nodes.
    unsafe {
        if (*call).funcid != pg_sys::Oid::from(pg_sys::F_NEXTVAL) || (*(*call).args).length != 1 {
            return false;
        }
        let arg = pg_sys::list_nth((*call).args, 0).cast::<pg_sys::Const>();
        if (*arg).xpr.type_ != pg_sys::NodeTag::T_Const
            || (*arg).consttype != pg_sys::REGCLASSOID
            || (*arg).constisnull
        {
            return false;
        }
        let seq = pg_sys::Oid::from((*arg).constvalue.value() as u32);
        schemas.contains(&pg_sys::get_rel_namespace(seq))
    }
}

/// `check_functions_in_node`'s callback: true (stop) for a function not allowed.
///
/// # Safety
/// `context` is the [`Walk`] of [`first_untrusted`].
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_function(func: pg_sys::Oid, context: *mut c_void) -> bool {
    // SAFETY: as the function's contract says.
    let walk = unsafe { &mut *context.cast::<Walk>() };
    // SAFETY: catalog lookups of a function an expression calls (it exists: the expression
    // depends on it).
    let (volatile, schema) = unsafe {
        (
            pg_sys::func_volatile(func),
            pg_sys::get_func_namespace(func),
        )
    };
    let builtin = func.to_u32() < pg_sys::FirstNormalObjectId;
    if (builtin && volatile as u8 == pg_sys::PROVOLATILE_IMMUTABLE)
        || walk.schemas.contains(&schema)
    {
        return false;
    }
    // SAFETY: the function's name and argument types, as regprocedure shows them.
    let name = unsafe { CStr::from_ptr(pg_sys::format_procedure(func)) };
    walk.found = Some(format!(
        "function {}{}",
        name.to_string_lossy(),
        if builtin { " (not IMMUTABLE)" } else { "" }
    ));
    true
}
