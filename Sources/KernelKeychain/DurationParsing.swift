import KeyringCore

/// Parses a timeout as people write one: `90` (seconds), `90s`, `15m`, `2h`, `7d`, `1w`,
/// or a run of them such as `1h30m`. Nil for anything else, for zero, and for totals the
/// kernel cannot hold (more than 2³²−1 seconds).
public func parseTimeout(_ text: String) -> Duration? {
    let bytes = Array(text.utf8)
    guard !bytes.isEmpty else { return nil }
    if bytes.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
        guard let seconds = UInt64(text), seconds >= 1, seconds <= UInt64(UInt32.max) else { return nil }
        return .seconds(seconds)
    }
    var total: UInt64 = 0
    var number: UInt64? = nil
    for byte in bytes {
        if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
            let (times10, overflow1) = (number ?? 0).multipliedReportingOverflow(by: 10)
            let (next, overflow2) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            number = next
            continue
        }
        // The kernel's units (as /proc/keys shows a time left); not a duration: another
        // byte, or a unit with no number before it.
        guard let unit = ProcKeysLine.secondsPerUnit(byte), let count = number else { return nil }
        let (part, overflow1) = count.multipliedReportingOverflow(by: unit)
        let (sum, overflow2) = total.addingReportingOverflow(part)
        guard !overflow1, !overflow2 else { return nil }
        total = sum
        number = nil
    }
    guard number == nil, total >= 1, total <= UInt64(UInt32.max) else { return nil }
    return .seconds(total)
}
