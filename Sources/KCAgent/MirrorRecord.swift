import FoundationEssentials

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The services kc-agent made, one name per line in `$XDG_STATE_HOME/kc/agent-services`
/// (names only, no secret): a service the configuration names is the agent's to replace
/// or remove only if the agent made it, so a mistyped secret or service never takes
/// over items the user stored.
struct MirrorRecord {
    let path: String
    private(set) var services: Swift.Set<String>

    init() {
        let state = ProcessInfo.processInfo.environment["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? ((ProcessInfo.processInfo.environment["HOME"] ?? "/") + "/.local/state")
        path = state + "/kc/agent-services"
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        services = Swift.Set(text.split(separator: "\n").map(String.init))
    }

    func contains(_ service: String) -> Bool { services.contains(service) }

    /// Adds a service before the agent first writes it (so a crash in between leaves it
    /// the agent's, as it is about to be).
    mutating func add(_ service: String) throws {
        guard services.insert(service).inserted else { return }
        try save()
    }

    mutating func remove(_ service: String) {
        guard services.remove(service) != nil else { return }
        try? save()
    }

    private func save() throws {
        let folder = String(path[..<path.lastIndex(of: "/")!])
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let text = services.sorted().joined(separator: "\n") + "\n"
        let temporary = path + ".\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]),
              rename(temporary, path) == 0
        else {
            throw MirrorRecordError(path: path, reason: String(cString: strerror(errno)))
        }
    }
}

struct MirrorRecordError: Error, CustomStringConvertible {
    var path: String
    var reason: String
    var description: String { "cannot write \(path) (\(reason)), where kc-agent records the services it made" }
}
