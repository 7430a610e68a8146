//! Bad files input: see main.rs. (Cases arrive with issue 39.)
