// SPDX-License-Identifier: Apache-2.0
//! Fits a line y = a·x + b by gradient descent, checkpointing with a `Manager`, and resumes where the last run
//! stopped. It also saves the final parameters to `<logdir>/model.npz`, a plain .npz that numpy reads:
//!
//! ```sh
//! cargo run --example save_and_resume -- /tmp/line 30    # steps 0..30
//! cargo run --example save_and_resume -- /tmp/line 60    # resumes at step 30
//! python3 -c "import numpy as np; print(dict(np.load('/tmp/line/model.npz')))"
//! ```
use std::process::ExitCode;

use ckpt::{Code, Manager, ManagerOptions, Vars};

fn run(logdir: &str, total: i64) -> ckpt::Result<()> {
    // The training state lives in the program's own arrays; the collection borrows them, so saves read them
    // and a restore writes straight into them — no copies.
    let mut params = [0.0f32; 2]; // a, b
    let mut step = [0i64];
    let mut vars = Vars::new()?;
    vars.add_borrowed("params", &[2], &mut params)?;
    vars.add_borrowed("step", &[], &mut step)?;

    let mut manager = Manager::open(logdir, &ManagerOptions::new().keep(3))?;
    match manager.restore(&mut vars, None) {
        Ok(idx) => println!("resuming from checkpoint {idx} (loss {})", vars.metadata("loss").unwrap_or("?")),
        Err(e) if e.code() == Code::NotFound => println!("no checkpoint in {logdir}: starting at step 0"),
        Err(e) => return Err(e),
    }

    let xs = [0.0f32, 1.0, 2.0, 3.0];
    let ys = [1.0f32, 3.0, 5.0, 7.0]; // y = 2x + 1
    while vars.get::<i64>("step")?[0] < total {
        let p = vars.get_mut::<f32>("params")?;
        let (mut grad_a, mut grad_b, mut loss) = (0.0f32, 0.0f32, 0.0f32);
        for (x, y) in xs.iter().zip(&ys) {
            let err = p[0] * x + p[1] - y;
            grad_a += 2.0 * err * x / xs.len() as f32;
            grad_b += 2.0 * err / xs.len() as f32;
            loss += err * err / xs.len() as f32;
        }
        p[0] -= 0.05 * grad_a;
        p[1] -= 0.05 * grad_b;
        let s = &mut vars.get_mut::<i64>("step")?[0];
        *s += 1;
        let now = *s;
        if now % 10 == 0 {
            vars.set_metadata("loss", &format!("{loss:.6}"))?;
            manager.save(&vars, now)?; // atomic and durable; keeps the newest 3
            println!("step {now}: loss {loss:.6}, saved {}", manager.path(now)?.display());
        }
    }
    manager.close()?;

    let model = std::path::Path::new(logdir).join("model.npz");
    vars.save(&model)?;
    drop(vars); // the borrows end: the arrays are the program's again
    println!("a = {:.4}, b = {:.4} after {} steps; wrote {}", params[0], params[1], step[0], model.display());
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let logdir = args.get(1).map_or("runs/save_and_resume", String::as_str);
    let total = match args.get(2).map(|s| s.parse::<i64>()) {
        None => 50,
        Some(Ok(n)) if n >= 0 => n,
        _ => {
            eprintln!("usage: save_and_resume [LOGDIR] [STEPS]");
            return ExitCode::from(2);
        }
    };
    match run(logdir, total) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("save_and_resume: {e}");
            ExitCode::FAILURE
        }
    }
}
