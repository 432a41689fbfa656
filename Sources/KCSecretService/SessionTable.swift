/// The open Secret Service sessions: each its path, the connection that opened it and,
/// for the DH transport, its key.
///
/// Clients open sessions freely and seldom close them: python SecretStorage opens one
/// for every `get_secret()` of an item it found by a search, on one connection, for as
/// long as the program runs. So a new session is never refused. Memory stays bounded
/// all the same: a connection that holds ``perConnection`` sessions loses its least
/// recently used one, and when all connections together hold ``total``, the connection
/// holding the most loses its least recently used one, so a client that floods
/// sessions (from many connections) closes its own, never a quiet client's. A session
/// closed so answers `NoSession` as any closed session does.
struct SessionTable {
    struct Session {
        var owner: String
        /// The AES key of a DH session; nil for `plain`.
        var key: [UInt8]?
        /// When it was opened or last used, on the table's own clock.
        fileprivate(set) var lastUsed: UInt64
    }

    let perConnection: Int
    let total: Int

    private var sessions: [String: Session] = [:]
    private var pathsByOwner: [String: Set<String>] = [:]
    private var clock: UInt64 = 0

    init(perConnection: Int = 64, total: Int = 4096) {
        precondition(perConnection > 0 && total >= perConnection)
        self.perConnection = perConnection
        self.total = total
    }

    /// How many sessions are open, in all or of one connection.
    var count: Int { sessions.count }
    func count(of owner: String) -> Int { pathsByOwner[owner]?.count ?? 0 }

    /// The connection that opened the session at `path`, nil if none is open there.
    func owner(of path: String) -> String? { sessions[path]?.owner }

    /// Opens a session at `path` (a path never used before) for `owner`; returns the
    /// paths of the sessions closed to make room for it.
    mutating func open(_ path: String, owner: String, key: [UInt8]?) -> [String] {
        var closed: [String] = []
        if count(of: owner) >= perConnection, let oldest = leastRecentlyUsed(of: owner) {
            close(oldest)
            closed.append(oldest)
        }
        if sessions.count >= total, let fullest = ownerHoldingTheMost(), let oldest = leastRecentlyUsed(of: fullest) {
            close(oldest)
            closed.append(oldest)
        }
        clock += 1
        sessions[path] = Session(owner: owner, key: key, lastUsed: clock)
        pathsByOwner[owner, default: []].insert(path)
        return closed
    }

    /// The session at `path` if `owner` opened it, marked as used now.
    mutating func use(_ path: String, by owner: String) -> Session? {
        guard var session = sessions[path], session.owner == owner else { return nil }
        clock += 1
        session.lastUsed = clock
        sessions[path] = session
        return session
    }

    /// Closes the session at `path`; its key is zeroed.
    mutating func close(_ path: String) {
        guard var session = sessions.removeValue(forKey: path) else { return }
        session.key?.zeroize()
        pathsByOwner[session.owner]?.remove(path)
        if pathsByOwner[session.owner]?.isEmpty == true { pathsByOwner[session.owner] = nil }
    }

    /// Closes every session of `owner` (a connection that left the bus).
    mutating func closeAll(of owner: String) {
        for path in pathsByOwner[owner] ?? [] { close(path) }
    }

    private func leastRecentlyUsed(of owner: String) -> String? {
        pathsByOwner[owner]?.min { (sessions[$0]?.lastUsed ?? 0) < (sessions[$1]?.lastUsed ?? 0) }
    }

    /// The connection with the most sessions; of several, the one whose least recently
    /// used session is the oldest.
    private func ownerHoldingTheMost() -> String? {
        var best: (owner: String, count: Int, oldest: UInt64)? = nil
        for (owner, paths) in pathsByOwner {
            guard paths.count >= best?.count ?? 0 else { continue }
            let oldest = paths.lazy.compactMap { sessions[$0]?.lastUsed }.min() ?? 0
            if let current = best, paths.count == current.count, oldest >= current.oldest { continue }
            best = (owner, paths.count, oldest)
        }
        return best?.owner
    }
}
