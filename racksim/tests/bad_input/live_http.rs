//! Bad live_http input: see main.rs. (Cases arrive with issue 39.)
