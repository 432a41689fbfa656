import KernelKeychain
import KeyringCore
import Keyrings

/// git's credential helper protocol (gitcredentials(7), git-credential(1)) and how kc
/// keeps git's credentials; `git-credential-kc get|store|erase` (in kc) reads the
/// command line and standard input and calls these.
///
/// The keyring mapping:
/// - One service per remote: `git:PROTOCOL:HOST`, and when git sends a path
///   (`credential.useHttpPath`) `git:PROTOCOL:HOST%2FPATH`. Each part is written with
///   ``CredentialName``'s escapes (`/` as `%2F`, `%` as `%25`; `:` as `%3A` in the
///   protocol), so `https://example.com:8443/team/repo.git` is
///   `git:https:example.com:8443%2Fteam%2Frepo.git`.
/// - One item per user name (escaped the same way), holding the password:
///   `kc get git:https:example.com alice` prints alice's password.
/// - `password_expiry_utc` is the item's kernel expiry; an expiry already past is not
///   stored, and one beyond the kernel's reach (2³²−1 seconds from now) is refused. `oauth_refresh_token` is the sibling item `USER%oauth_refresh_token`,
///   without expiry (it exists to outlive the password).
/// - `%latest` holds the user name stored last: a `get` without a user name answers with
///   the only user, or with that one.
/// - `erase` removes a user's password and refresh token; when git sends the password,
///   only if it is the one stored (as git's own helpers do).
///
/// Input is `key=value` lines up to an empty line or the end, at most 64 KiB, no NUL.
/// Unknown keys are ignored, as git requires.
public enum GitCredentialHelper {
    /// The most input a helper reads: git sends a few short `key=value` lines.
    public static let inputLimit = 65536
    static let latestItem = KeyName("%latest")
    static let refreshSuffix = Array(staticBytes(GitCredentialNames.refreshSuffix))

    /// What git said about one credential (``parse(_:)`` reads it). Values are bytes,
    /// as git passes them; the password and refresh token are secrets.
    public struct Credential {
        var protocolName: [UInt8]?
        var host: [UInt8]?
        var path: [UInt8]?
        var username: [UInt8]?
        var password: [UInt8]?
        var passwordExpiry: Int64?
        var refreshToken: [UInt8]?

        /// Zeroes the password and the refresh token.
        public mutating func overwriteWithZeros() {
            password?.overwriteWithZeros()
            refreshToken?.overwriteWithZeros()
        }
    }

    /// Why the helper cannot do what git asked; `message` is the text after
    /// `kc: git-credential-kc: `, and never holds a secret.
    public struct Failure: Error {
        public var message: String
        /// A failure that `message` says all of.
        public init(_ message: String) { self.message = message }
        init(_ error: KeychainError) { self.message = "\(error)" }
    }

    // MARK: The protocol

    /// Parses `key=value` lines (a final CR is dropped, as git does). `url=` stands for
    /// its parts and, as in git, clears what came before it. The caller zeroes `input`.
    public static func parse(_ input: [UInt8]) throws(Failure) -> Credential {
        var credential = Credential()
        var failure: Failure? = nil
        // The lines as the core reads them (the front's `get` reads them so too).
        let lineError = input.withUnsafeBytes { input in
            GitCredentialNames.forEachAttribute(in: input) { keyBytes, valueBytes in
                let key = String(decoding: keyBytes, as: UTF8.self)
                let value = Array(valueBytes)
                switch key {
                case "protocol": credential.protocolName = value
                case "host": credential.host = value
                case "path": credential.path = value
                case "username": credential.username = value
                case "password": credential.password?.overwriteWithZeros(); credential.password = value
                case "oauth_refresh_token": credential.refreshToken?.overwriteWithZeros(); credential.refreshToken = value
                case "password_expiry_utc":
                    guard let text = String(validating: value, as: UTF8.self), let seconds = Int64(text) else {
                        failure = Failure("password_expiry_utc on line \(lineNumber(of: keyBytes, in: input)) is not a number of seconds since 1970")
                        return false
                    }
                    credential.passwordExpiry = seconds
                case "url":
                    credential.overwriteWithZeros()
                    do throws(Failure) { credential = try parseURL(value) } catch {
                        failure = error
                        return false
                    }
                default:
                    break  // an attribute of a newer git, or another helper's
                }
                return true
            }
        }
        if let failure {
            credential.overwriteWithZeros()
            throw failure
        }
        switch lineError {
        case .nul(let line)?:
            credential.overwriteWithZeros()
            throw Failure("line \(line) holds a NUL byte; git never sends one")
        case .notKeyValue(let line)?:
            credential.overwriteWithZeros()
            throw Failure("line \(line) is not key=value")
        case nil:
            return credential
        }
    }

    /// The number (from 1) of the line a key of `input` is on, for a message.
    private static func lineNumber(of key: UnsafeRawBufferPointer, in input: UnsafeRawBufferPointer) -> Int {
        guard let start = key.baseAddress, let base = input.baseAddress else { return 1 }
        return 1 + UnsafeRawBufferPointer(start: base, count: start - base).count { $0 == UInt8(ascii: "\n") }
    }

    /// `PROTOCOL://[USER[:PASSWORD]@]HOST[/PATH]`, split and decoded exactly as git's
    /// credential_from_url does, so kc answers for the host git will send the answer
    /// to: the host ends at the first `/`, `?` or `#`; the user information ends at the
    /// first `@` before it; user, password, host and path lose their %XX escapes, and
    /// the path its leading and trailing slashes.
    static func parseURL(_ url: [UInt8]) throws(Failure) -> Credential {
        let separator = Array("://".utf8)
        guard let schemeEnd = url.firstRange(of: separator) else {
            throw Failure("url= needs PROTOCOL://HOST, e.g. url=https://example.com")
        }
        var credential = Credential()
        credential.protocolName = Array(url[..<schemeEnd.lowerBound])
        var rest = url[schemeEnd.upperBound...]
        let slash = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex
        var authority = rest[..<slash]
        if let at = authority.firstIndex(of: UInt8(ascii: "@")) {
            let userInfo = authority[..<at]
            if let colon = userInfo.firstIndex(of: UInt8(ascii: ":")) {
                credential.username = percentDecoded(userInfo[..<colon])
                credential.password = percentDecoded(userInfo[(colon + 1)...])
            } else {
                credential.username = percentDecoded(userInfo)
            }
            authority = authority[(at + 1)...]
        }
        credential.host = percentDecoded(authority)
        if slash < rest.endIndex {
            rest = rest[slash...]
            while rest.first == UInt8(ascii: "/") { rest = rest.dropFirst() }
            while rest.last == UInt8(ascii: "/") { rest = rest.dropLast() }
            if !rest.isEmpty { credential.path = percentDecoded(rest) }
        }
        return credential
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func percentDecoded(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var decoded: [UInt8] = []
        var index = bytes.startIndex
        while index < bytes.endIndex {
            // Exactly two hex digits, as git's url decoding takes them ("%+f" stays as it is).
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.endIndex,
               let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) {
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(bytes[index])
                index += 1
            }
        }
        return decoded
    }

    // MARK: Names

    /// The service of a remote, or nil when git did not say which (no protocol, or
    /// neither host nor path), the host holds a `/`, or the name would be too long.
    static func serviceName(for credential: Credential) -> KeyName? {
        GitCredentialNames.service(protocolName: credential.protocolName, host: credential.host, path: credential.path)
            .map { KeyName(bytes: $0) }
    }

    /// The items of a user: the password's and the refresh token's.
    static func itemNames(forUser user: [UInt8]) -> (password: KeyName, refreshToken: KeyName)? {
        GitCredentialNames.items(forUser: user).map { (KeyName(bytes: $0.password), KeyName(bytes: $0.refreshToken)) }
    }

    /// The users with a password or refresh token in the service, by name.
    static func storedUsers(in keychain: Keychain) throws(Failure) -> [[UInt8]] {
        var users: [[UInt8]] = []
        for name in try reported({ () throws(KeychainError) in try keychain.allKeyNames() }) {
            guard let user = GitCredentialNames.user(ofItem: name.bytes), !users.contains(user) else { continue }
            users.append(user)
        }
        return users
    }

    // MARK: Actions

    /// The answer for the remote: `username`, `password` (and `password_expiry_utc`,
    /// `oauth_refresh_token`) lines; empty when there is no credential, so git asks on.
    /// The caller writes it to standard output and zeroes it.
    public static func get(_ credential: Credential) throws(Failure) -> [UInt8] {
        guard let service = serviceName(for: credential) else { return [] }
        let keychain = try reported { () throws(KeychainError) in try Keychain(service: service) }
        guard let user = try chosenUser(credential.username, in: keychain),
              let names = itemNames(forUser: user) else { return [] }

        var password: [UInt8]? = try reported { () throws(KeychainError) in try keychain.data(forKey: names.password) }
        defer { password?.overwriteWithZeros() }
        var refreshToken: [UInt8]? = try reported { () throws(KeychainError) in try keychain.data(forKey: names.refreshToken) }
        defer { refreshToken?.overwriteWithZeros() }
        guard password != nil || refreshToken != nil else { return [] }
        var output: [UInt8] = []
        do {
            // Room for every line up front: a reallocation would leave a copy behind.
            output.reserveCapacity(user.count + (password?.count ?? 0) + (refreshToken?.count ?? 0) + 128)
            try append("username", user, to: &output)
            if let password {
                try append("password", password, to: &output)
                if let deadline = try reported({ () throws(KeychainError) in try keychain.deadline(forKey: names.password) }) {
                    try append("password_expiry_utc", Array(String(deadline.secondsSinceEpoch).utf8), to: &output)
                }
            }
            if let refreshToken { try append("oauth_refresh_token", refreshToken, to: &output) }
        } catch {
            output.overwriteWithZeros()
            throw error
        }
        return output
    }

    /// The user git asked for, else the only stored user, else the one stored last.
    private static func chosenUser(_ asked: [UInt8]?, in keychain: Keychain) throws(Failure) -> [UInt8]? {
        if let asked, !asked.isEmpty { return asked }
        let users = try storedUsers(in: keychain)
        if users.count <= 1 { return users.first }
        var latest: [UInt8]? = try reported { () throws(KeychainError) in try keychain.data(forKey: latestItem) }
        defer { latest?.overwriteWithZeros() }
        if let latest, users.contains(latest) { return latest }
        return users.first
    }

    /// Stores the password (with its expiry) and refresh token of a user. Without a
    /// remote, a user name or a password there is nothing to store, as for git's own
    /// helpers (an empty `password=` is a password: git's store helper keeps it too); a
    /// password whose expiry has passed is not stored either.
    public static func store(_ credential: Credential, at accessibility: Accessibility = .whenUnlocked) throws(Failure) {
        guard let service = serviceName(for: credential),
              let user = credential.username, !user.isEmpty,
              let password = credential.password else { return }
        var deadline: Deadline? = nil
        if let expiry = credential.passwordExpiry {
            let now = Deadline.now
            guard expiry > now else { return }
            // The kernel counts a key's timeout in an unsigned int of seconds. A later
            // expiry is refused, not cut short or dropped: no token lives 136 years, so
            // it is a mistake (milliseconds for seconds) that storing would hide. git
            // shows this on its standard error and goes on; the remote asks again.
            guard expiry - now <= Int64(UInt32.max) else {
                throw Failure("not stored: password_expiry_utc \(expiry) is more than \(UInt32.max) seconds (136 years) from now, beyond what the kernel can keep; it should be seconds since 1970 (is it in milliseconds?)")
            }
            deadline = Deadline(secondsSinceEpoch: expiry)
        }
        guard let names = itemNames(forUser: user) else {
            throw Failure("the user name is too long for an item name (at most 235 bytes here)")
        }
        let keychain = try reported { () throws(KeychainError) in try Keychain(service: service, accessibility: accessibility) }
        try reported { () throws(KeychainError) in
            try keychain.set(password, forKey: names.password, until: deadline)
            // A refresh token belongs to the password it came with: a new password
            // without one leaves none behind.
            if let refreshToken = credential.refreshToken, !refreshToken.isEmpty {
                try keychain.set(refreshToken, forKey: names.refreshToken)
            } else {
                try keychain.remove(names.refreshToken)
            }
            try keychain.set(user, forKey: latestItem)
        }
    }

    /// Removes the user's credential (every user's when git names none); when git sends
    /// a password, only a credential holding that password.
    public static func erase(_ credential: Credential) throws(Failure) {
        guard let service = serviceName(for: credential) else { return }
        let keychain = try reported { () throws(KeychainError) in try Keychain(service: service) }
        let users: [[UInt8]]
        if let user = credential.username, !user.isEmpty { users = [user] } else { users = try storedUsers(in: keychain) }
        try reported { () throws(KeychainError) in
            var latest = try keychain.data(forKey: latestItem)
            defer { latest?.overwriteWithZeros() }
            for user in users {
                guard let names = itemNames(forUser: user) else { continue }
                if let password = credential.password, try !keychain.matches(password, forKey: names.password) { continue }
                try keychain.remove(names.password)
                try keychain.remove(names.refreshToken)
                if latest == user { try keychain.remove(latestItem) }
            }
            let remaining = try keychain.allKeyNames()
            if remaining.isEmpty || remaining == [latestItem] { try keychain.removeAll() }
        }
    }

    // MARK: Input

    /// Where git's input ends in `bytes[range]`: at the first empty line (a line feed at
    /// the very start, or one right after another, or after a carriage return that
    /// follows one), if one is there. `range` is what was read last, and the byte before it.
    public static func blankLineEnd(in bytes: [UInt8], _ range: Range<Int>) -> Int? {
        let newline = UInt8(ascii: "\n"), carriageReturn = UInt8(ascii: "\r")
        for index in range where bytes[index] == newline {
            var start = index
            if start > 0 && bytes[start - 1] == carriageReturn { start -= 1 }
            if start == 0 || bytes[start - 1] == newline { return start }
        }
        return nil
    }

    // MARK: Helpers

    /// Appends `key=value\n`; a value with a line feed cannot travel in git's protocol.
    private static func append(_ key: String, _ value: [UInt8], to output: inout [UInt8]) throws(Failure) {
        guard !value.contains(UInt8(ascii: "\n")), !value.contains(0) else {
            throw Failure("the stored \(key) holds a line break or NUL, which git's credential protocol cannot carry; store it again with git")
        }
        output += Array(key.utf8)
        output.append(UInt8(ascii: "="))
        output += value
        output.append(UInt8(ascii: "\n"))
    }

    private static func reported<R>(_ body: () throws(KeychainError) -> R) throws(Failure) -> R {
        do {
            return try body()
        } catch {
            throw Failure(error)
        }
    }
}
