#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The `kc get` spellings `main()` runs without ArgumentParser, read from argv directly
/// (even `CommandLine.arguments` costs a generic lookup): after `get`, in any order,
/// at most one `-q`/`--quiet`, at most one `--group G` or `--from U` (a value not
/// starting with `-`), an optional `--`, and exactly two names. A name starts with `-`
/// only after `--`. Anything else (`--group=G`, `-qq`, `--help`, a third name) is left
/// to the parser, which accepts every spelling this does and means the same by it.
struct FastGet {
    var service: UnsafePointer<CChar>
    var key: UnsafePointer<CChar>
    var group: UnsafePointer<CChar>?
    var owner: UnsafePointer<CChar>?
    var quiet = false

    static func fromCommandLine() -> FastGet? {
        let argc = Int(CommandLine.argc), argv = CommandLine.unsafeArgv
        // `kc get S K` up to `kc get -q --group G -- S K`.
        guard argc >= 4, argc <= 8, let verb = argv[1], strcmp(verb, "get") == 0 else { return nil }
        var service: UnsafePointer<CChar>?, key: UnsafePointer<CChar>?
        var group: UnsafePointer<CChar>?, owner: UnsafePointer<CChar>?
        var quiet = false, optionsEnded = false
        var index = 2
        while index < argc {
            guard let argument = argv[index] else { return nil }
            index += 1
            if !optionsEnded && argument.pointee == CChar(UInt8(ascii: "-")) {
                if strcmp(argument, "--") == 0 {
                    optionsEnded = true
                } else if strcmp(argument, "-q") == 0 || strcmp(argument, "--quiet") == 0 {
                    guard !quiet else { return nil }
                    quiet = true
                } else if strcmp(argument, "--group") == 0 || strcmp(argument, "--from") == 0 {
                    guard group == nil, owner == nil, index < argc, let value = argv[index],
                          value.pointee != CChar(UInt8(ascii: "-")) else { return nil }
                    index += 1
                    if strcmp(argument, "--group") == 0 { group = UnsafePointer(value) } else { owner = UnsafePointer(value) }
                } else {
                    return nil
                }
            } else if service == nil {
                service = UnsafePointer(argument)
            } else if key == nil {
                key = UnsafePointer(argument)
            } else {
                return nil
            }
        }
        guard let service, let key else { return nil }
        return FastGet(service: service, key: key, group: group, owner: owner, quiet: quiet)
    }
}
