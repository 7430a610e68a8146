//! Bad cli input: see main.rs. (Cases arrive with issue 39.)
