import CSDBus
import KernelKeychain
import Keyrings
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension SecretService {
    func invoke(_ object: Object, interface: String, member: String, message: BusReader, call: OpaquePointer,
              caller: Caller, path: String) throws(BusError) {
        switch (object, interface, member) {
        // org.freedesktop.Secret.Service
        case (.service, Self.serviceInterface, "OpenSession"):
            try message.expect("sv")
            let (output, session) = try openSession(algorithm: try message.string(), message: message, caller: caller)
            try reply(call) { writer in
                writer.open("v", output == nil ? "s" : "ay")
                if let output { writer.bytes(output) } else { writer.string("") }
                writer.close()
                writer.objectPath(session)
            }
            // The next key pair is made when the daemon is idle (SecretDaemon's loop), not
            // here: the client's next call (SearchItems) is usually already on its way.
        case (.service, Self.serviceInterface, "SearchItems"):
            try message.expect("a{ss}")
            let found = try store.items(in: nil, matching: try message.stringDictionary())
            try reply(call) { writer in
                writer.objectPaths(found.filter { !$0.locked }.map(itemPath))
                writer.objectPaths(found.filter(\.locked).map(itemPath))
            }
        case (.service, Self.serviceInterface, "GetSecrets"):
            try message.expect("aoo")
            let (paths, sessionPath) = (try message.objectPaths(), try message.objectPath())
            try SecretLimits.checkPaths(paths.count)
            let session = try self.session(sessionPath, of: caller)
            var secrets: [(String, WireSecret)] = []
            for itemPath in paths {
                // As the spec says: items that do not exist or are locked are left out.
                guard let target = SecretPath.parse(itemPath), case .item(let found)? = try? resolve(target, path: itemPath),
                      !found.locked, let secret = try? secret(of: found, session: sessionPath, session, caller: caller) else { continue }
                secrets.append((itemPath, secret))
            }
            try reply(call) { writer in
                writer.open("a", "{o(oayays)}")
                for (itemPath, secret) in secrets {
                    writer.open("e", "o(oayays)")
                    writer.objectPath(itemPath)
                    writer.secret(secret)
                    writer.close()
                }
                writer.close()
            }
        case (.service, Self.serviceInterface, "Unlock"):
            try message.expect("ao")
            let (done, prompt) = try lockOrUnlock(try message.objectPaths(), lock: false)
            try reply(call) { $0.objectPaths(done); $0.objectPath(prompt) }
            announceLockChange(of: done)
        case (.service, Self.serviceInterface, "Lock"):
            try message.expect("ao")
            let (done, prompt) = try lockOrUnlock(try message.objectPaths(), lock: true)
            try reply(call) { $0.objectPaths(done); $0.objectPath(prompt) }
            announceLockChange(of: done)
        case (.service, Self.serviceInterface, "ReadAlias"):
            try message.expect("s")
            let target = store.alias(try message.string())
            try reply(call) { $0.objectPath(target.map(SecretPath.collection) ?? SecretPath.none) }
        case (.service, Self.serviceInterface, "SetAlias"):
            try message.expect("so")
            let (name, target) = (try message.string(), try message.objectPath())
            if target == SecretPath.none {
                try store.setAlias(name, to: nil)
            } else {
                guard case .collection(let collection, false)? = SecretPath.parse(target) else { throw .noSuchObject(target) }
                try store.setAlias(name, to: collection)
            }
            try reply(call) { _ in }
        case (.service, Self.serviceInterface, "CreateCollection"):
            try message.expect("a{sv}s")
            let properties = try message.properties()
            let alias = try message.string()
            let collection: String
            if !alias.isEmpty, let existing = store.alias(alias) {
                collection = existing
            } else {
                guard case .string(let label)? = properties["org.freedesktop.Secret.Collection.Label"] ?? .string("") else {
                    throw .invalidArguments("org.freedesktop.Secret.Collection.Label must be a string")
                }
                collection = try store.createCollection(label: label)
                if !alias.isEmpty { try store.setAlias(alias, to: collection) }
                emit(SecretPath.service, Self.serviceInterface, "CollectionCreated") { $0.objectPath(SecretPath.collection(collection)) }
                emitPropertiesChanged(SecretPath.service, Self.serviceInterface, changed: ["Collections"])
            }
            try reply(call) { $0.objectPath(SecretPath.collection(collection)); $0.objectPath(SecretPath.none) }

        // org.freedesktop.Secret.Collection
        case (.collection(let collection), Self.collectionInterface, "SearchItems"):
            try message.expect("a{ss}")
            let found = try store.items(in: collection, matching: try message.stringDictionary())
            try reply(call) { $0.objectPaths(found.map(itemPath)) }
        case (.collection(let collection), Self.collectionInterface, "CreateItem"):
            try message.expect("a{sv}(oayays)b")
            let properties = try message.properties()
            let wire = try message.secret()
            let replace = try message.bool()
            let label: String
            switch properties["org.freedesktop.Secret.Item.Label"] {
            case nil: label = ""
            case .string(let text)?: label = text
            default: throw .invalidArguments("org.freedesktop.Secret.Item.Label must be a string")
            }
            let attributes: [String: String]
            switch properties["org.freedesktop.Secret.Item.Attributes"] {
            case nil: attributes = [:]
            case .attributes(let given)?: attributes = given
            default: throw .invalidArguments("org.freedesktop.Secret.Item.Attributes must be a{ss}")
            }
            var value = try decrypt(wire, caller: caller)
            defer { value.overwriteWithZeros() }
            let (item, isNew) = try store.create(in: collection, attributes: attributes, label: label, value: value,
                                                 contentType: wire.contentType, replace: replace)
            let created = itemPath(item)
            try reply(call) { $0.objectPath(created); $0.objectPath(SecretPath.none) }
            emit(SecretPath.collection(collection), Self.collectionInterface, isNew ? "ItemCreated" : "ItemChanged") { $0.objectPath(created) }
            if isNew { emitPropertiesChanged(SecretPath.collection(collection), Self.collectionInterface, changed: ["Items"]) }
        case (.collection(let collection), Self.collectionInterface, "Delete"):
            try message.expect("")
            let deleted = try store.deleteCollection(collection)
            try reply(call) { $0.objectPath(SecretPath.none) }
            for item in deleted { emit(SecretPath.collection(collection), Self.collectionInterface, "ItemDeleted") { $0.objectPath(itemPath(item)) } }
            emit(SecretPath.service, Self.serviceInterface, "CollectionDeleted") { $0.objectPath(SecretPath.collection(collection)) }
            emitPropertiesChanged(SecretPath.service, Self.serviceInterface, changed: ["Collections"])

        // org.freedesktop.Secret.Item
        case (.item(let item), Self.itemInterface, "GetSecret"):
            try message.expect("o")
            let sessionPath = try message.objectPath()
            let session = try self.session(sessionPath, of: caller)
            let secret = try secret(of: item, session: sessionPath, session, caller: caller)
            try reply(call) { $0.secret(secret) }
        case (.item(let item), Self.itemInterface, "SetSecret"):
            try message.expect("(oayays)")
            let wire = try message.secret()
            var value = try decrypt(wire, caller: caller)
            defer { value.overwriteWithZeros() }
            try store.setSecret(of: item, value: value, contentType: wire.contentType)
            try reply(call) { _ in }
            emit(SecretPath.collection(item.collection), Self.collectionInterface, "ItemChanged") { $0.objectPath(path) }
        case (.item(let item), Self.itemInterface, "Delete"):
            try message.expect("")
            try store.delete(item)
            try reply(call) { $0.objectPath(SecretPath.none) }
            emit(SecretPath.collection(item.collection), Self.collectionInterface, "ItemDeleted") { $0.objectPath(itemPath(item)) }
            emitPropertiesChanged(SecretPath.collection(item.collection), Self.collectionInterface, changed: ["Items"])

        // org.freedesktop.Secret.Session and .Prompt
        case (.session(let session), Self.sessionInterface, "Close"):
            try message.expect("")
            // Only the connection that opened a session closes it (another client must
            // not break a session it cannot use either).
            guard sessions.owner(of: session) == caller.name else {
                throw .accessDenied("\(session) belongs to another connection; only the one that opened it closes it")
            }
            sessions.close(session)
            try reply(call) { _ in }
        case (.prompt(let prompt), Self.promptInterface, "Prompt"), (.prompt(let prompt), Self.promptInterface, "Dismiss"):
            // kc-secretd never shows a prompt: one exists only for what `kc unlock` (or a
            // login) opens. Asked to show it, it answers why, as an error the client's
            // library reports (secret-tool prints it; a dismissed prompt it would take
            // for "not found"), and the prompt is done: no Completed follows, which a
            // client that heard the error no longer waits for. A client that expects no
            // reply, or dismisses the prompt, hears it was dismissed.
            if member == "Prompt" { try message.expect("s") } else { try message.expect("") }
            let why = prompts.removeValue(forKey: prompt) ?? "nothing to unlock"
            if member == "Prompt" {
                Log.error(why)
                if sd_bus_message_get_expect_reply(call) > 0 { throw .isLocked(why) }
            }
            try reply(call) { _ in }
            emit(prompt, Self.promptInterface, "Completed") { writer in
                writer.bool(true)
                writer.open("v", "ao")
                writer.objectPaths([])
                writer.close()
            }
        default:
            throw .unknownMethod(interface, member, on: path)
        }
    }

    // MARK: Sessions and secrets

    private func openSession(algorithm: String, message: BusReader, caller: Caller) throws(BusError) -> (output: [UInt8]?, path: String) {
        let contents = message.peek()?.contents ?? ""
        switch algorithm {
        case Self.plainAlgorithm:
            guard contents == "s" else { throw .invalidArguments("the plain algorithm takes an empty string, not '\(contents)'") }
            try message.skip()
            return (nil, addSession(key: nil, caller: caller))
        case Self.dhAlgorithm:
            guard contents == "ay", try message.enter("v", "ay") else {
                throw .invalidArguments("\(Self.dhAlgorithm) takes the client's public key as bytes (ay), not '\(contents)'")
            }
            let clientKey = try message.bytes()
            try message.exit()
            let keyPair: DHKeyPair
            do throws(SecretCryptoError) {
                if let spare = spareKeyPair {
                    keyPair = spare
                    spareKeyPair = nil
                } else {
                    keyPair = try DHKeyPair.generate()
                }
            } catch {
                throw .failed("no key pair: \(error)")
            }
            let key: [UInt8]
            do throws(SecretCryptoError) {
                key = try keyPair.sharedAESKey(clientPublicKey: clientKey)
            } catch {
                throw .invalidArguments("the client's public key is not usable: \(error)")
            }
            return (keyPair.publicKey, addSession(key: key, caller: caller))
        default:
            throw .notSupported("kc-secretd has no algorithm '\(algorithm)'; it speaks \(Self.plainAlgorithm) and \(Self.dhAlgorithm)")
        }
    }

    /// A new session of the caller's, in the table that makes room for it.
    private func addSession(key: [UInt8]?, caller: Caller) -> String {
        let path = nextPath(SecretPath.sessionPrefix, "s")
        for closed in sessions.open(path, owner: caller.name, key: key) {
            Log.info("closed \(closed), the least recently used session, to open \(path) for \(caller.name)")
        }
        return path
    }

    /// Makes the next session's key pair if none waits; called when no message waits.
    func prepareKeyPair() {
        if spareKeyPair == nil { spareKeyPair = try? DHKeyPair.generate() }
    }

    /// The caller's session at `path`, now its most recently used.
    func session(_ path: String, of caller: Caller) throws(BusError) -> SessionTable.Session {
        guard let session = sessions.use(path, by: caller.name) else { throw .noSession(path) }
        return session
    }

    private func decrypt(_ wire: WireSecret, caller: Caller) throws(BusError) -> [UInt8] {
        let session = try self.session(wire.session, of: caller)
        guard let key = session.key else { return wire.value }
        do throws(SecretCryptoError) {
            return try SecretCipher.decrypt(wire.value, parameters: wire.parameters, key: key)
        } catch {
            throw .invalidArguments("the secret could not be decrypted with the session's key: \(error)")
        }
    }

    private func secret(of item: SecretStore.Found, session path: String, _ session: SessionTable.Session, caller: Caller) throws(BusError) -> WireSecret {
        var (value, contentType) = try store.secret(of: item)
        defer { value.overwriteWithZeros() }
        if audit {
            ReadAudit.record(ItemRead(via: "secret-service", service: item.id.service, item: item.id.name,
                                      readerPID: caller.pid, readerUID: caller.uid))
        }
        guard let key = session.key else {
            return WireSecret(session: path, parameters: [], value: value, contentType: contentType)
        }
        do throws(SecretCryptoError) {
            let (parameters, sealed) = try SecretCipher.encrypt(value, key: key)
            return WireSecret(session: path, parameters: parameters, value: sealed, contentType: contentType)
        } catch {
            throw .failed("the secret could not be encrypted: \(error)")
        }
    }

    // MARK: Lock and unlock

    /// Locks or unlocks collections and items (an item's collection). What is unlocked
    /// is what can be read now, as `Locked` and `SearchItems` say: a client's `Lock` is
    /// undone at once, but an item the kernel does not hold (the vault locked with its
    /// level, or a `when-unlocked` item of another login) waits for `kc unlock`. For
    /// those the answer is a prompt, whose `Prompt` says why and what opens them.
    private func lockOrUnlock(_ paths: [String], lock: Bool) throws(BusError) -> ([String], String) {
        try SecretLimits.checkPaths(paths.count)
        var done: [String] = []
        var waiting: [String] = []
        var why: String? = nil
        for path in paths {
            guard let target = SecretPath.parse(path) else { continue }
            let collection: String
            switch target {
            case .collection(let name, let alias), .item(let name, let alias, _):
                guard let resolved = try? collectionName(name, alias: alias, path: path) else { continue }
                collection = resolved
            default:
                continue
            }
            if lock {
                store.lock(collection: collection)
                done.append(path)
                continue
            }
            guard store.unlock(collection: collection) else {
                waiting.append(path)
                why = why ?? "the vault is locked: run 'kc unlock'"
                continue
            }
            do throws(BusError) {
                let stillLocked: SecretStore.Found?
                if case .item(_, _, let id) = target {
                    // An item that is not there is left out, as the spec says.
                    guard let item = try store.item(id, in: collection) else { continue }
                    stillLocked = try withCurrentLock(item, path: path).locked ? item : nil
                } else {
                    stillLocked = try store.items(in: collection, matching: [:]).first(where: \.locked)
                }
                if let stillLocked {
                    waiting.append(path)
                    why = why ?? reason(stillLocked)
                } else {
                    done.append(path)
                }
            } catch {
                waiting.append(path)
                why = why ?? error.message
            }
        }
        guard !waiting.isEmpty, let why else { return (done, SecretPath.none) }
        let prompt = nextPath(SecretPath.promptPrefix, "p")
        // A client that never answers its prompts must not grow the daemon without bound.
        if prompts.count >= 256, let oldest = prompts.keys.min(by: { $0.count != $1.count ? $0.count < $1.count : $0 < $1 }) {
            prompts[oldest] = nil
        }
        let count = waiting.count == 1 ? "1 object stays" : "\(waiting.count) objects stay"
        prompts[prompt] = "\(why) (kc-secretd never prompts; \(count) locked)"
        return (done, prompt)
    }

    /// The item as it is now: whether its value can be read is asked of the kernel, as a
    /// search asks (``SecretStore/item(_:in:)`` does not, to spare a lookup a probe).
    func withCurrentLock(_ item: SecretStore.Found, path: String) throws(BusError) -> SecretStore.Found {
        guard let current = try store.items(in: item.collection, matching: item.attributes).first(where: { $0.id == item.id }) else {
            throw .noSuchObject(path)
        }
        return current
    }

    /// Why a locked item cannot be read: the keychain's own answer, which names what
    /// opens it (`kc unlock`, in this login for a `when-unlocked` item).
    private func reason(_ item: SecretStore.Found) -> String {
        var asked = item
        asked.locked = false
        do throws(BusError) {
            var (value, _) = try store.secret(of: asked)
            value.overwriteWithZeros()
            return "\(SecretStore.describe(item.id)) can be read again: ask once more"
        } catch {
            return error.message
        }
    }
}
