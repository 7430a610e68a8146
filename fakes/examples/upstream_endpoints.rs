fn main() {
    print!("{}", racksim_fakes::upstream::endpoints_markdown());
}
