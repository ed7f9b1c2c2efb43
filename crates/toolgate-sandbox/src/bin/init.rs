//! `toolgate-sandbox-init`: the sandbox's first process (see `toolgate_sandbox::init`).

fn main() {
    std::process::exit(toolgate_sandbox::init::main(std::env::args_os().skip(1)));
}
