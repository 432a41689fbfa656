import KCIntegrations

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Prints a value as pretty JSON with sorted keys: the stable `--json` format.
func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    var bytes = Array(try encoder.encode(value))
    bytes.append(UInt8(ascii: "\n"))
    try writeStandardOutput(bytes)
}
