// SPDX-License-Identifier: Apache-2.0
//! sys.rs's structs against the C compiler's layout of the installed header: size, alignment and every field's
//! offset. Needs a C compiler (`cc`); without one the check is skipped with a note.
use std::mem::{align_of, size_of, MaybeUninit};
use std::process::Command;

use ckpt::sys;

use crate::common::TempDir;

/// "struct size align" and "struct.field offset" lines, as the Rust side sees them.
macro_rules! layout {
    ($out:ident, $t:ident { $($field:ident),* $(,)? }) => {{
        $out.push(format!("{} {} {}", stringify!($t), size_of::<sys::$t>(), align_of::<sys::$t>()));
        let value = MaybeUninit::<sys::$t>::uninit();
        let base = value.as_ptr() as usize;
        $(
            // SAFETY: only the field's address is taken, never read.
            let field = unsafe { std::ptr::addr_of!((*value.as_ptr()).$field) } as usize;
            $out.push(format!("{}.{} {}", stringify!($t), stringify!($field), field - base));
        )*
        let c = format!(
            "  printf(\"%s %zu %zu\\n\", \"{t}\", sizeof({t}), _Alignof({t}));\n{fields}",
            t = stringify!($t),
            fields = [$(format!(
                "  printf(\"%s %zu\\n\", \"{t}.{f}\", offsetof({t}, {f}));\n",
                t = stringify!($t),
                f = stringify!($field)
            )),*].concat()
        );
        c
    }};
}

#[test]
fn structs_have_the_c_compilers_layout() {
    let mut rust = Vec::new();
    let program = [
        layout!(
            rust,
            ckpt_options {
                version,
                layout,
                compression,
                level,
                rename,
                rename_payload,
                max_header_bytes,
                progress,
                progress_payload,
                storage,
                max_members,
                max_total_bytes,
            }
        ),
        layout!(
            rust,
            ckpt_storage_ops {
                version,
                payload,
                make_dirs,
                create,
                open_append,
                write,
                sync,
                close,
                rename,
                sync_dir,
                remove,
                list,
                open_read,
                read_at,
                close_read,
                destroy,
                free_space,
                list_dirs,
                remove_dir,
                rename_dir,
                list_incomplete,
                abort_incomplete,
                list_entries,
                stat,
                clone_range,
            }
        ),
        layout!(rust, ckpt_file_info { size, modified_ns, is_dir, reserved }),
        layout!(rust, ckpt_writer_options { version, kind, queue_depth, storage, out_dir }),
        layout!(
            rust,
            ckpt_manager_options {
                version,
                keep,
                keep_every,
                flags,
                queue_depth,
                subdir,
                npz,
                log,
                log_payload,
                storage,
            }
        ),
    ]
    .concat();

    let header = crate::completeness::header_path();
    let include = header.parent().and_then(|p| p.parent()).unwrap();
    let dir = TempDir::new("layout");
    let source = dir.join("layout.c");
    std::fs::write(
        &source,
        format!("#include <stddef.h>\n#include <stdio.h>\n#include <ckpt/ckpt.h>\nint main(void) {{\n{program}  return 0;\n}}\n"),
    )
    .unwrap();
    let exe = dir.join("layout");
    let compiled = Command::new("cc").args(["-std=c11", "-I"]).arg(include).arg(&source).arg("-o").arg(&exe).output();
    let compiled = match compiled {
        Ok(out) => out,
        Err(e) => {
            eprintln!("no C compiler ({e}): the layout check is skipped");
            return;
        }
    };
    assert!(compiled.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&compiled.stderr));
    let out = Command::new(&exe).output().unwrap();
    let c: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(String::from).collect();
    assert_eq!(rust, c);
}
