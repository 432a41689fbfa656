/// Why OpenBao did not give the agent what it asked for, in one line.
public enum OpenBaoError: Error, Sendable, CustomStringConvertible {
    /// No address answered (every one's failure).
    case unreachable([TransportError])
    /// Every address that answered is sealed, or has no active node to forward to.
    case unavailable(address: String, status: Int, messages: [String])
    /// OpenBao refused the request (4xx): the token, a policy, the path.
    case refused(path: String, status: Int, messages: [String])
    /// An answer the agent cannot read.
    case malformed(path: String, what: String)

    public var description: String {
        switch self {
        case .unreachable(let failures):
            return "OpenBao cannot be reached: " + failures.map(\.description).joined(separator: "; ")
        case .unavailable(let address, let status, let messages):
            let said = messages.isEmpty ? "HTTP \(status)" : messages.joined(separator: "; ")
            return "OpenBao at \(address) cannot serve requests (\(said))"
        case .refused(let path, let status, let messages):
            let said = messages.isEmpty ? "" : ": " + messages.joined(separator: "; ")
            return "OpenBao refused \(path) (HTTP \(status))\(said)"
        case .malformed(let path, let what):
            return "OpenBao's answer to \(path) is not what kc-agent expects: \(what)"
        }
    }

    /// Whether waiting may help: the cluster is down, sealed or electing a leader.
    public var isOutage: Bool {
        switch self {
        case .unreachable, .unavailable: true
        case .refused, .malformed: false
        }
    }

    /// The HTTP status OpenBao answered with, where it answered.
    public var status: Int? {
        switch self {
        case .unavailable(_, let status, _), .refused(_, let status, _): status
        case .unreachable, .malformed: nil
        }
    }

    /// OpenBao refused the token itself (expired, revoked, or never valid).
    public var isBadToken: Bool {
        guard case .refused(_, let status, let messages) = self else { return false }
        return status == 403 && (messages.isEmpty || messages.contains { $0.contains("permission denied") || $0.contains("invalid token") || $0.contains("bad token") })
    }
}

/// OpenBao's HTTP API at one or more addresses (the nodes of a cluster): a request
/// goes to the node that answered last, and moves on to the next when that one is
/// down, sealed or without a leader. Standby nodes forward to the active one.
public final class OpenBaoClient {
    public let addresses: [String]
    public private(set) var current = 0
    private let transport: HTTPTransport
    /// The token sent as X-Vault-Token. A secret: never logged.
    public var token: String?

    public init(addresses: [String], tls: TLSSettings) {
        precondition(!addresses.isEmpty)
        self.addresses = addresses.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        self.transport = HTTPTransport(tls: tls)
    }

    public var currentAddress: String { addresses[current] }

    /// One API call (`path` below /v1/). Returns the decoded body, or nil for a 204 or a
    /// 404 when `missingIsNil`. Throws for anything else but 2xx.
    @discardableResult
    public func call(_ method: String, _ path: String, body: JSONValue? = nil, authenticated: Bool = true,
                     missingIsNil: Bool = false) throws(OpenBaoError) -> JSONValue? {
        // A standby answers reads from its own copy, which trails the active node's by
        // up to a few hundred milliseconds (OpenBao 2.7): asked to forward them, it never
        // hands the agent a version older than one already mirrored.
        var headers = ["X-Vault-Request: true", "X-Vault-Inconsistent: forward-active-node"]
        if authenticated, let token { headers.append("X-Vault-Token: " + token) }
        var failures: [TransportError] = []
        var lastUnavailable: OpenBaoError? = nil
        for attempt in 0..<addresses.count {
            let index = (current + attempt) % addresses.count
            let address = addresses[index]
            var response: HTTPResponse
            do {
                response = try transport.send(method, address + "/v1/" + path, headers: headers, body: body?.encoded())
            } catch {
                failures.append(TransportError(address: address, reason: error.reason))
                continue
            }
            defer { response.wipe() }
            let document = response.body.isEmpty ? nil : JSONValue.decode(response.body)
            let messages = document?["errors"]?.array?.compactMap(\.string) ?? []
            switch response.status {
            case 200..<300:
                current = index
                if response.status == 204 { return nil }
                guard let document else { throw .malformed(path: path, what: "HTTP \(response.status) without a JSON body") }
                return document
            case 404 where missingIsNil && messages.isEmpty:
                current = index
                return nil
            case 500..<600, 429:
                // Sealed (503), a standby with no active node to forward to, a node
                // mid-election: another node may serve.
                lastUnavailable = .unavailable(address: address, status: response.status, messages: messages)
                continue
            default:
                current = index
                throw .refused(path: path, status: response.status, messages: messages)
            }
        }
        if let lastUnavailable { throw lastUnavailable }
        throw .unreachable(failures)
    }
}
