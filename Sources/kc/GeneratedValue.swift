import KernelKeychain


/// `kc set --generate`: a random value from the kernel's CSPRNG, of letters and
/// digits, or with --symbols of every printable ASCII character but space.
struct GeneratedValue {
    static let defaultLength = 32
    static let lengths = 4...4096

    var length: Int
    var symbols: Bool

    private var alphabet: [UInt8] {
        let letters = Array(UInt8(ascii: "A")...UInt8(ascii: "Z")) + Array(UInt8(ascii: "a")...UInt8(ascii: "z"))
        let digits = Array(UInt8(ascii: "0")...UInt8(ascii: "9"))
        return symbols ? Array(UInt8(ascii: "!")...UInt8(ascii: "~")) : letters + digits
    }

    /// The value: each character drawn without bias (Swift's uniform sampling) from
    /// SystemRandomNumberGenerator, which on Linux is getrandom(2). 32 letters and
    /// digits hold 190 bits.
    func make() -> [UInt8] {
        let alphabet = self.alphabet
        var generator = SystemRandomNumberGenerator()
        return (0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] }
    }

    /// The arguments with a bare `--generate` of `kc set` spelled `--generate=32`:
    /// ArgumentParser has no option whose value may be left out. `--generate N` keeps
    /// its N.
    static func spelledOut(_ arguments: [String]) -> [String] {
        guard arguments.first == "set",
              let index = arguments.firstIndex(where: { $0 == "--generate" || $0 == "--" }), arguments[index] == "--generate"
        else { return arguments }
        let next = arguments.dropFirst(index + 1).first
        if let next, !next.isEmpty, next.allSatisfy(\.isNumber) { return arguments }
        var spelled = arguments
        spelled[index] = "--generate=\(defaultLength)"
        return spelled
    }
}
