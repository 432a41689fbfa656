// Each harness checks a property, not only "no crash": what a parser accepts must
// satisfy its contract, and what it writes must read back the same.
import KernelKeychain
import KeychainFS
import Keyrings

#if canImport(Glibc)
import Glibc
#endif

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    switch target {
    case "names": fuzzNames(bytes)
    case "timeout": fuzzTimeout(bytes)
    case "json": fuzzJSON(bytes)
    case "dotenv": fuzzDotEnv(bytes)
    case "describe": fuzzDescribe(bytes)
    case "paths": fuzzPaths(bytes)
    default: require(false, "set KC_FUZZ_TARGET to names, timeout, json, dotenv, describe or paths")
    }
    return 0
}

private let target: String = getenv("KC_FUZZ_TARGET").map { String(cString: $0) } ?? ""

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition {
        var line = "kc-fuzz: property violated: \(message())\n"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
        abort()
    }
}

private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

private func fuzzNames(_ bytes: [UInt8]) {
    // Names are bytes: the same rules whether or not they are UTF-8.
    let name = KeyName(bytes: bytes)
    require(name.bytes == bytes, "KeyName(bytes:) did not keep \(bytes)")
    for kind in [NameKind.service, .item] {
        let accepted = (try? validateName(name, as: kind)) != nil
        let expected = !bytes.isEmpty && bytes.count <= 255 && !bytes.contains(UInt8(ascii: "/")) && !bytes.contains(0)
            && bytes != [0x2e] && bytes != [0x2e, 0x2e]
        require(accepted == expected, "validateName(\(bytes)) accepted=\(accepted)")
    }
}

private func fuzzTimeout(_ bytes: [UInt8]) {
    let input = text(bytes)
    guard let duration = parseTimeout(input) else { return }
    let seconds = duration.components.seconds
    require(seconds >= 1 && seconds <= Int64(UInt32.max), "parseTimeout(\(input)) = \(seconds) s")
    if input.allSatisfy({ $0.isASCII && $0.isNumber }) {
        require(UInt64(input) == UInt64(seconds), "plain seconds \(input) became \(seconds)")
    }
}

private func fuzzJSON(_ bytes: [UInt8]) {
    guard let items = try? KeychainArchive.decodeJSON(bytes) else { return }
    for item in items {
        require((try? validateName(item.service, as: .service)) != nil && (try? validateName(item.name, as: .item)) != nil,
                "accepted a bad name")
        require(!item.value.isEmpty && item.value.count <= KeychainError.maximumValueSize, "accepted a bad size")
    }
    let again = try? KeychainArchive.decodeJSON(KeychainArchive.encodeJSON(items))
    require(again == items, "JSON export does not read back the same")
}

private func fuzzDotEnv(_ bytes: [UInt8]) {
    guard let entries = try? DotEnv.parse(text(bytes)) else { return }
    for entry in entries {
        require(DotEnv.isValidName(entry.name), "accepted the name \(entry.name)")
        require(!entry.value.isEmpty && entry.value.count <= KeychainError.maximumValueSize, "accepted a bad size")
    }
    // Values no quoting carries to every dotenv reader are refused on export (DotEnv.quoted).
    let renderable = entries.filter {
        !$0.value.contains(0) && (try? DotEnv.quoted(String(decoding: $0.value, as: UTF8.self)).get()) != nil
    }
    guard let rendered = try? DotEnv.render(renderable.map { ($0.name, $0.value) }) else {
        return require(false, "parsed entries cannot be rendered")
    }
    let again = try? DotEnv.parse(rendered)
    require(again?.map(\.name) == renderable.map(\.name) && again?.map(\.value) == renderable.map(\.value),
            "dotenv does not read back the same")
}

private func fuzzDescribe(_ bytes: [UInt8]) {
    guard let parsed = KeyDescription(parsing: bytes) else { return }
    require(!parsed.type.isEmpty && !parsed.type.contains(";"), "type \(parsed.type)")
    let description = parsed.description.bytes
    require(bytes.count > description.count && bytes[bytes.count - description.count - 1] == UInt8(ascii: ";")
            && bytes.suffix(description.count).elementsEqual(description), "the description is not the bytes after the fourth ';'")
}

private let filesystem = KeychainFilesystem(configuration: MountConfiguration(uid: 0, gid: 0))
private let serviceRooted = KeychainFilesystem(configuration: MountConfiguration(service: "svc", uid: 0, gid: 0))

private func fuzzPaths(_ bytes: [UInt8]) {
    // The kernel hands the bridge one path component at a time; walk them all.
    var node = Node.root
    var rootedNode = Node.root
    for component in bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
        let name = KeyName(bytes: component)
        let valid = (try? validateName(name, as: .item)) != nil
        if let child = try? filesystem.child(of: node, named: name) {
            require(valid, "child(named: \(name.bytes)) accepted an invalid name")
            node = child
        }
        if let child = try? serviceRooted.child(of: rootedNode, named: name) {
            if case .item(let service, _) = child { require(service == "svc", "escaped the mounted service") }
            rootedNode = child
        }
    }
}

// SwiftPM links an executable's entry point as `<module>_main`; hand control to
// libFuzzer's driver from there (libFuzzer's own main would be shadowed).
@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt

@_cdecl("kc_fuzz_main")
public func kcFuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var vector = argv
    return LLVMFuzzerRunDriver(&count, &vector) { data, size in fuzzOneInput(data, size) }
}
