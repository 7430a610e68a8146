//! # racksim-workspace-hack: one feature set per third-party crate
//!
//! Cargo resolves features per command: `cargo run -p racksim` sees only
//! what racksim asks of, say, tokio, while `cargo test --workspace` adds
//! what every member and dev-dependency asks, so the two commands built
//! 121 third-party crates twice on a fresh clone (issue 40). Every member
//! depends on this empty crate, whose `Cargo.toml` asks for the union of
//! those features, so every command builds each crate once, the same way.
//!
//! The section between the `HAKARI` markers is generated: after changing a
//! dependency, run `cargo hakari generate && cargo hakari manage-deps`
//! (`cargo install --locked cargo-hakari`); `cargo hakari verify` checks it.
//! Omicron does the same with `omicron-workspace-hack`.
