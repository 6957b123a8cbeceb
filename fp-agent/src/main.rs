fn main() -> std::process::ExitCode {
    fp_agent::cli::main()
}
