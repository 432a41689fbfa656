import KernelKeychain

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// kc as OpenBao's agent: logs in with AppRole credentials kept in kc, keeps the token
/// in kc with its TTL as the item's deadline (renewed before it ends, logging in again
/// when renewal is refused), mirrors KV v2 secrets into services (each version whole,
/// replacing the one before in one step), and holds leased secrets with the lease's end
/// as their deadline, so the kernel drops them when it comes.
///
/// One thread, one loop: each turn checks the token, asks each secret's current
/// version, and issues or renews what is due; then it sleeps for the poll interval.
/// When OpenBao is down or sealed the items kc holds stay readable until their
/// deadlines, and the agent says what it waits for.
public final class Agent {
    public let configuration: AgentConfiguration
    private let client: OpenBaoClient
    private let log: (String) -> Void

    /// When the token must be renewed (seconds since the epoch); nil: no deadline.
    private var tokenRenewal: Int64? = nil
    /// The token's end; nil: it does not expire.
    private var tokenEnd: Int64? = nil
    private var kvStates: [KVState]
    private var leaseStates: [LeaseState]
    /// What the agent last said it is waiting for, said once until it changes.
    private var waiting: String? = nil
    /// Problems already reported, so that a poll every 500 ms does not repeat them.
    private var reported = Swift.Set<String>()
    /// When the next login may be tried after one was refused.
    private var nextLogin: Int64 = 0
    /// The services the agent made (and so may replace and remove).
    private var mirrors = MirrorRecord()

    struct KVState {
        var mountChecked = false
        var applied: Int64? = nil
        var problem: String? = nil
        /// The token may read the secret's data but not its metadata: poll the data.
        var dataOnly = false
        /// A version that could not be kept, and when it is tried again.
        var failedVersion: Int64? = nil
        var retryAt: Int64 = 0
    }

    struct LeaseState {
        var leaseID: String? = nil
        var renewable = false
        var renewAt: Int64 = 0
        var end: Int64? = nil
        var keys: [KeyName] = []
    }

    public init(configuration: AgentConfiguration, log: @escaping (String) -> Void) {
        self.configuration = configuration
        self.client = OpenBaoClient(addresses: configuration.addresses, tls: configuration.tls)
        self.log = log
        kvStates = Array(repeating: KVState(), count: configuration.kv.count)
        leaseStates = Array(repeating: LeaseState(), count: configuration.leases.count)
    }

    /// A failure that waiting fixes (OpenBao down or sealed, credentials not yet
    /// stored), or one that needs a person (a refused login, a policy).
    enum Stop: Error {
        case waitFor(String)
    }

    /// Runs until killed; with `once`, one turn: exit status 0 when everything synced.
    public func run(once: Bool) -> Int32 {
        let interval = configuration.pollInterval
        while true {
            let clean = turn()
            if once { return clean ? 0 : 1 }
            sleep(for: interval)
        }
    }

    /// One turn: true when nothing failed.
    @discardableResult
    public func turn() -> Bool {
        do {
            try ensureToken()
            var clean = true
            for index in configuration.kv.indices {
                clean = try refusalReported("kv[\(index)]") { try syncKV(index) } && clean
            }
            for index in configuration.leases.indices {
                clean = try refusalReported("leases[\(index)]") { try syncLease(index) } && clean
            }
            if let waiting {
                log("OpenBao answers again at \(client.currentAddress) (was: \(waiting))")
                self.waiting = nil
            }
            return clean
        } catch let error as OpenBaoError where error.isBadToken {
            // Revoked or expired under the agent: log in again on the next turn.
            dropToken()
            say("the token was refused (\(error)); logging in again")
            return false
        } catch let error as OpenBaoError {
            say("waiting for OpenBao: \(error); the items kc holds stay readable until their deadlines")
            return false
        } catch Stop.waitFor(let reason) {
            say(reason)
            return false
        } catch {
            say("\(error)")
            return false
        }
    }

    /// One secret's sync: OpenBao refusing it (a policy, a path) is reported once and
    /// the others go on; an outage or a refused token ends the turn.
    private func refusalReported(_ place: String, _ body: () throws -> Bool) throws -> Bool {
        do {
            return try body()
        } catch let error as OpenBaoError where !error.isOutage {
            // A 403 is a bad token or a policy that denies this path: OpenBao says
            // "permission denied" for both. The token's own lookup tells them apart, so
            // one denied secret neither costs a login per poll nor stops the others.
            if error.isBadToken, try !tokenStillValid() { throw error }
            report("\(place): \(error)")
            return false
        }
    }

    /// Whether OpenBao still accepts the token (its lookup of itself succeeds).
    private func tokenStillValid() throws -> Bool {
        switch attempt("GET", "auth/token/lookup-self") {
        case .success: return true
        case .failure(let error):
            if error.isOutage { throw error }
            return false
        }
    }

    private func say(_ reason: String) {
        guard waiting != reason else { return }
        waiting = reason
        log(reason)
    }

    private func report(_ problem: String) {
        guard reported.insert(problem).inserted else { return }
        log(problem)
    }

    // MARK: The token

    private func authKeychain() throws -> Keychain {
        try Keychain(service: configuration.auth.service).accessibility(configuration.auth.level).ephemeral()
    }

    private func ensureToken() throws {
        let now = Deadline.now
        if client.token == nil {
            if let stored = try Keychain(service: configuration.auth.service).string(forKey: "token") {
                client.token = stored
                switch attempt("GET", "auth/token/lookup-self") {
                case .success(let answer):
                    schedule(ttl: answer?["data"]?["ttl"]?.seconds ?? 0, now: now)
                    return
                case .failure(let error):
                    guard error.isBadToken else { throw error }
                    dropToken()
                }
            }
            try login(now: now)
            return
        }
        if let end = tokenEnd, now >= end { dropToken(); try login(now: now); return }
        guard let renewal = tokenRenewal, now >= renewal else { return }
        switch attempt("POST", "auth/token/renew-self", body: .object([:])) {
        case .success(let answer):
            let ttl = answer?["auth"]?["lease_duration"]?.seconds ?? 0
            // A renewal capped by the token's max TTL gives less each time: once what is
            // left is short, a new login gives a whole TTL again.
            if case .appRole = configuration.auth, ttl > 0, ttl < 3 * Int64(configuration.pollInterval.components.seconds + 1) {
                try login(now: now)
                return
            }
            if case .appRole = configuration.auth {
                try storeToken(client.token ?? "", ttl: ttl, now: now)
            } else {
                // The user's own token item (maybe kept in the vault) is left as they stored it.
                schedule(ttl: ttl, now: now)
            }
        case .failure(let error):
            if error.isOutage { throw error }
            log("renewing the token was refused (\(error)); logging in again")
            dropToken()
            try login(now: now)
        }
    }

    /// A call whose refusal the caller handles.
    private func attempt(_ method: String, _ path: String, body: JSONValue? = nil, authenticated: Bool = true) -> Result<JSONValue?, OpenBaoError> {
        Result { () throws(OpenBaoError) in try client.call(method, path, body: body, authenticated: authenticated) }
    }

    private func login(now: Int64) throws {
        guard case .appRole(let mount, let service, _) = configuration.auth else {
            throw Stop.waitFor("no token in kc that OpenBao accepts: store a valid one with 'kc set \(configuration.auth.service) token' (standard input)")
        }
        guard now >= nextLogin else { throw Stop.waitFor(waiting ?? "waiting to log in again") }
        let keychain = try Keychain(service: service)
        guard let roleID = try keychain.string(forKey: "role_id"), let secretID = try keychain.string(forKey: "secret_id") else {
            throw Stop.waitFor("waiting for the AppRole credentials: store them with 'kc set \(service) role_id' and 'kc set \(service) secret_id' (values on standard input)")
        }
        let answer: JSONValue?
        switch attempt("POST", "auth/\(mount)/login", body: .object(["role_id": .string(roleID), "secret_id": .string(secretID)]),
                       authenticated: false) {
        case .success(let value):
            answer = value
        case .failure(let error):
            if error.isOutage { throw error }
            nextLogin = now + 5
            throw Stop.waitFor("the AppRole login at auth/\(mount) was refused (\(error)): store a valid secret id with 'kc set \(service) secret_id'; trying again every 5 s")
        }
        guard let token = answer?["auth"]?["client_token"]?.string else {
            throw OpenBaoError.malformed(path: "auth/\(mount)/login", what: "no auth.client_token")
        }
        try storeToken(token, ttl: answer?["auth"]?["lease_duration"]?.seconds ?? 0, now: now)
        log("logged in to OpenBao at \(client.currentAddress) with AppRole; token kept in kc as \(service)/token")
    }

    private func storeToken(_ token: String, ttl: Int64, now: Int64) throws {
        client.token = token
        let deadline: Deadline? = ttl > 0 ? Deadline(secondsSinceEpoch: now + ttl) : nil
        try authKeychain().set(Array(token.utf8), forKey: "token", until: deadline)
        schedule(ttl: ttl, now: now)
    }

    private func schedule(ttl: Int64, now: Int64) {
        tokenEnd = ttl > 0 ? now + ttl : nil
        tokenRenewal = ttl > 0 ? now + max(ttl * 2 / 3, 1) : nil
    }

    /// Forgets a token OpenBao refused. The agent's own (from an AppRole login) goes
    /// from kc too; one the user stored (the token method) is theirs to replace.
    private func dropToken() {
        client.token = nil
        tokenEnd = nil
        tokenRenewal = nil
        if case .appRole = configuration.auth { _ = try? authKeychain().remove("token") }
    }

    // MARK: KV version 2

    /// Mirrors one secret's current version: false when it cannot (the problem is
    /// reported once; what kc holds stays as it was).
    private func syncKV(_ index: Int) throws -> Bool {
        let mapping = configuration.kv[index]
        if let problem = kvStates[index].problem { report(problem); return false }
        if !kvStates[index].mountChecked {
            let answer = try client.call("GET", "sys/internal/ui/mounts/\(mapping.secret)")
            let type = answer?["data"]?["type"]?.string ?? "?"
            let version = answer?["data"]?["options"]?["version"]?.string ?? "1"
            let mount = answer?["data"]?["path"]?.string ?? mapping.mount + "/"
            guard type == "kv", version == "2" else {
                let kind = type == "kv" ? "a KV version \(version) engine" : "a '\(type)' engine"
                kvStates[index].problem = "kv[\(index)]: '\(mapping.secret)' is not a KV version 2 secret: its mount '\(mount)' is \(kind); kc-agent syncs KV v2 secrets (put others under \"leases\")"
                report(kvStates[index].problem!)
                return false
            }
            if mount != mapping.mount + "/" {
                kvStates[index].problem = "kv[\(index)]: '\(mapping.secret)' is in the mount '\(mount)', not '\(mapping.mount)/': set \"mount\": \"\(mount.dropLast())\""
                report(kvStates[index].problem!)
                return false
            }
            kvStates[index].mountChecked = true
        }
        let keychain = try Keychain(service: mapping.service).accessibility(mapping.level).ephemeral()
        var current: Int64 = 0
        var members: [JSONKey: JSONValue]? = nil
        if !kvStates[index].dataOnly {
            switch attempt("GET", "\(mapping.mount)/metadata/\(mapping.path)") {
            case .success(let metadata):
                guard let version = metadata?["data"]?["current_version"]?.integer else {
                    throw OpenBaoError.malformed(path: "\(mapping.mount)/metadata/\(mapping.path)", what: "no data.current_version")
                }
                current = version
                let versions = metadata?["data"]?["versions"]
                let entry = versions?[String(current)]
                let deleted = (entry?["deletion_time"]?.string ?? "") != "" || entry?["destroyed"]?.bool == true
                if current == 0 || deleted { return try mirrorGone(index, keychain, why: "version \(current) is deleted") }
                if kvStates[index].applied == current { return true }
                // An older current version while the one mirrored is still listed: a node
                // that has not caught up. Never go back; the next poll asks again.
                if let applied = kvStates[index].applied, applied > current, versions?[String(applied)] != nil { return true }
                if let failed = kvStates[index].failedVersion, failed == current, Deadline.now < kvStates[index].retryAt { return false }
                let answer = try client.call("GET", "\(mapping.mount)/data/\(mapping.path)?version=\(current)", missingIsNil: true)
                guard let object = answer?["data"]?["data"]?.object else {
                    return try mirrorGone(index, keychain, why: "version \(current) is deleted")
                }
                members = object
            case .failure(.refused(_, 404, let messages)) where messages.isEmpty:
                return try mirrorGone(index, keychain, why: "does not exist")
            case .failure(let error):
                if error.isOutage { throw error }
                // A policy that lets the token read the secret's data and not its metadata
                // (a common least-privilege one): the data's own answer carries the version.
                guard error.isBadToken, try tokenStillValid() else { throw error }
                kvStates[index].dataOnly = true
                log("kv[\(index)]: the token may not read \(mapping.mount)/metadata/\(mapping.path); polling \(mapping.mount)/data/\(mapping.path) instead")
            }
        }
        if kvStates[index].dataOnly {
            guard let answer = try client.call("GET", "\(mapping.mount)/data/\(mapping.path)", missingIsNil: true),
                  let object = answer["data"]?["data"]?.object else {
                return try mirrorGone(index, keychain, why: "is deleted or does not exist")
            }
            current = answer["data"]?["metadata"]?["version"]?.integer ?? 0
            if kvStates[index].applied == current { return true }
            if let failed = kvStates[index].failedVersion, failed == current, Deadline.now < kvStates[index].retryAt { return false }
            members = object
        }
        guard let members else { return false }
        let items = members.keys.sorted().map { (key: KeyName(bytes: $0.bytes), value: members[$0]!.itemBytes) }
        if !mirrors.contains(mapping.service) {
            // A service the user made (or a mistyped one that happens to exist) is not
            // the agent's to replace.
            if try keychain.serviceExists() {
                report("kv[\(index)]: service '\(mapping.service)' exists and kc-agent did not make it: its items are not replaced; name another service, or remove it (kc rm \(mapping.service)) to let the agent mirror \(mapping.secret) there")
                return false
            }
            try mirrors.add(mapping.service)
        }
        if let error = Self.problem(with: items) ?? replacing(keychain, with: items, until: nil).map({ "\($0)" }) {
            // Not fetched and tried again at every poll (a version over the key quota
            // would fill it each time, and fail the user's own writes meanwhile): a minute
            // later, or at once for a newer version.
            kvStates[index].failedVersion = current
            kvStates[index].retryAt = Deadline.now + 60
            log("kv[\(index)]: '\(mapping.secret)' version \(current) cannot be kept in kc: \(error); service '\(mapping.service)' keeps \(kvStates[index].applied.map { $0 == 0 ? "nothing" : "version \($0)" } ?? "what it held"); trying again in a minute or at the next version")
            return false
        }
        log("\(mapping.secret) version \(current) -> service \(mapping.service) (\(items.count) item\(items.count == 1 ? "" : "s"))")
        kvStates[index].applied = current
        kvStates[index].failedVersion = nil
        return true
    }

    /// ``Keychain/replaceAllItems(with:until:)``, its failure returned.
    private func replacing(_ keychain: Keychain, with items: [(key: KeyName, value: [UInt8])], until deadline: Deadline?) -> KeychainError? {
        do { try keychain.replaceAllItems(with: items, until: deadline); return nil } catch { return error }
    }

    /// What makes a set of items one kc cannot hold, naming the key: checked before
    /// anything is written, so the set goes in whole or not at all.
    static func problem(with items: [(key: KeyName, value: [UInt8])]) -> String? {
        for (key, value) in items {
            do throws(KeychainError) { try validateName(key, as: .item) } catch { return "key '\(key)': \(error)" }
            if value.count > KeychainError.maximumValueSize {
                return "key '\(key)': \(KeychainError.valueTooLarge(size: value.count))"
            }
        }
        return nil
    }

    /// A secret deleted in OpenBao goes from kc too: its service is its mirror.
    private func mirrorGone(_ index: Int, _ keychain: Keychain, why: String) throws -> Bool {
        let mapping = configuration.kv[index]
        if kvStates[index].applied == 0 { return true }
        if mirrors.contains(mapping.service) {
            if try keychain.serviceExists() {
                try keychain.removeAll()
                log("\(mapping.secret) \(why): service \(mapping.service) removed")
            }
            mirrors.remove(mapping.service)
        } else if kvStates[index].applied == nil {
            report("kv[\(index)]: \(mapping.secret) \(why); service '\(mapping.service)' is left as it is (kc-agent did not make it)")
        }
        kvStates[index].applied = 0
        return true
    }

    // MARK: Leases

    private func syncLease(_ index: Int) throws -> Bool {
        let mapping = configuration.leases[index]
        let now = Deadline.now
        var state = leaseStates[index]
        guard now >= state.renewAt else { return true }
        let keychain = try Keychain(service: mapping.service).accessibility(mapping.level).ephemeral()
        if let leaseID = state.leaseID, state.renewable, let end = state.end, now < end {
            switch attempt("PUT", "sys/leases/renew", body: .object(["lease_id": .string(leaseID)])) {
            case .success(let answer):
                let duration = answer?["lease_duration"]?.seconds ?? 0
                if duration > 0 {
                    let newEnd = now + duration
                    // Renewed to no later than before (the lease's max TTL): issued anew.
                    if newEnd > end {
                        for key in state.keys { _ = try keychain.setTimeout(.seconds(duration), forKey: key) }
                        state.end = newEnd
                        state.renewAt = now + max(duration * 2 / 3, 1)
                        leaseStates[index] = state
                        log("\(mapping.path): lease renewed, items of \(mapping.service) now end in \(duration) s")
                        return true
                    }
                }
            case .failure(let error):
                if error.isOutage { throw error }
                log("\(mapping.path): renewing the lease was refused (\(error)); asking for a new one")
            }
        }
        if !mirrors.contains(mapping.service) {
            if try keychain.serviceExists() {
                state.renewAt = now + 60
                leaseStates[index] = state
                report("leases[\(index)]: service '\(mapping.service)' exists and kc-agent did not make it: its items are not replaced; name another service, or remove it (kc rm \(mapping.service))")
                return false
            }
            try mirrors.add(mapping.service)
        }
        var answer: JSONValue?
        switch attempt(mapping.method, mapping.path, body: mapping.method == "GET" ? nil : (mapping.data ?? .object([:]))) {
        case .success(let value):
            answer = value
        case .failure(let error):
            if error.isOutage || error.isBadToken { throw error }
            state.renewAt = now + 10
            leaseStates[index] = state
            report("leases[\(index)]: \(error); trying again in 10 s")
            return false
        }
        guard let members = answer?["data"]?.object else {
            throw OpenBaoError.malformed(path: mapping.path, what: "no data in the answer")
        }
        let duration = answer?["lease_duration"]?.seconds ?? 0
        var end: Int64? = duration > 0 ? now + duration : nil
        if end == nil, let expiration = members["expiration"]?.integer, expiration > now {
            end = now + min(expiration - now, JSONValue.longestSeconds)
        }
        let items = members.keys.sorted().filter { members[$0]?.isNull == false }.map { (key: KeyName(bytes: $0.bytes), value: members[$0]!.itemBytes) }
        if let error = Self.problem(with: items) ?? replacing(keychain, with: items, until: end.map { Deadline(secondsSinceEpoch: $0) }).map({ "\($0)" }) {
            state.renewAt = now + 60
            leaseStates[index] = state
            report("leases[\(index)]: '\(mapping.path)' cannot be kept in kc: \(error)")
            return false
        }
        state.leaseID = answer?["lease_id"]?.string.flatMap { $0.isEmpty ? nil : $0 }
        state.renewable = answer?["renewable"]?.bool ?? false
        state.end = end
        state.keys = items.map(\.key)
        state.renewAt = end.map { now + max(($0 - now) * 2 / 3, 1) } ?? Int64.max
        leaseStates[index] = state
        log("\(mapping.path) -> service \(mapping.service) (\(items.count) items\(end.map { ", until \($0 - now) s from now" } ?? ", no end"))")
        return true
    }
}

/// Sleeps, resuming after a signal's handler.
func sleep(for duration: Duration) {
    let (seconds, attoseconds) = duration.components
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
}
