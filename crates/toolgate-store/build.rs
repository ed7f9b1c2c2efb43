//! The migrations are embedded at compile time (refinery's `embed_migrations!`), which does not
//! tell cargo to watch their folder: this does, so an added or edited migration file rebuilds
//! the crate.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
