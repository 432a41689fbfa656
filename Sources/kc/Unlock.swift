import ArgumentParser
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension KC {
    struct Unlock: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unlock the vault: load its items into the kernel.",
            discussion: """
            Asks for the vault's passphrase (or reads it from --passphrase-fd N, or from
            standard input when that is not a terminal) and loads every saved item into
            the keyring of its level: when-unlocked into this login session,
            after-first-unlock into the user keyring (until reboot), always into the
            persistent keyring. Items the kernel holds already are left alone. Exits 2 on
            a wrong passphrase, having loaded nothing.

            A file or folder of the vault that cannot be used (damaged, another user's,
            open to other users) is named with what is wrong and the fix (for a folder
            open to others: chmod 700 PATH); the rest still load, and kc exits 2. kc
            never removes such a file or folder: it may hold saved items.

              kc unlock
              kc unlock --passphrase-fd 3 3< ~/.config/kc/passphrase

            --pam is for PAM (pam_kc.so, switched on with 'pam-auth-update --enable kc';
            see the README), which gives kc the user's ids, groups and HOME from the
            name service (under pam_exec kc looks PAM_USER up in /etc/passwd); kc
            becomes the user before it touches anything: as the auth step it reads the login
            password on standard input and loads after-first-unlock and always items; as
            the session step it loads the new login session's when-unlocked items with
            what the auth step left in the user keyring. A user without a vault is not
            an error. What goes wrong is one line on standard error, which pam_kc.so
            writes to the auth log.
            """
        )

        @OptionGroup var passphrase: PassphraseOptions

        @Flag(help: "Run as PAM's auth or session step (pam_kc.so, or pam_exec; reads PAM_USER and PAM_TYPE).")
        var pam = false

        @Flag(help: "Print what was loaded as JSON.")
        var json = false

        func run() throws {
            if pam { return try runForPAM() }
            let vault = try Vault.atDefaultLocation()
            guard vault.exists else { throw KeychainError.vaultNotInitialized(path: vault.path) }
            var secret = try passphrase.read(prompt: "Passphrase for the vault at \(vault.path): ")
            defer { secret.overwriteWithZeros() }
            let loginPasswordAhead = (try? vault.status())?.loginPasswordAhead != nil
            let report: VaultUnlockReport
            do {
                report = try vault.unlock(passphrase: secret)
            } catch .wrongPassphrase(let path) {
                if loginPasswordAhead {
                    standardError("kc: wrong passphrase for the vault at \(path): nothing was loaded or changed. Your login password was changed without the old one reaching the vault, so the vault still opens with its old passphrase; unlock with that, then run 'kc vault passwd'")
                    throw ExitStatus.failure
                }
                throw KeychainError.wrongPassphrase(path: path)
            }
            if loginPasswordAhead {
                standardError("kc: note: your login password was changed without the old one reaching the vault, so login cannot unlock it; run 'kc vault passwd' to set its passphrase to your login password")
            }
            try show(report, json: json)
        }

        /// The pam_exec step: root until it becomes PAM_USER; never prompts.
        private func runForPAM() throws {
            let type = getenv("PAM_TYPE").map { String(cString: $0) } ?? ""
            let user = try pamUser()
            var password: [UInt8] = []
            defer { password.overwriteWithZeros() }
            if type == "auth" { password = try readPassphrase(fd: 0, what: "PAM (expose_authtok)", keepNewline: true) }
            try PAMUser.become(user, newSession: type == "auth")
            if type == "auth" || type == "open_session" { Vault.keepUserKeyringLinkable() }
            let vault = try Vault.atDefaultLocation()
            guard vault.exists else { return }  // this user keeps no vault
            switch type {
            case "auth":
                // Unlocked already (another login, sudo in a terminal): no passphrase work.
                let report: VaultUnlockReport
                do {
                    report = try vault.unlockWithStashedIdentity(levels: [.afterFirstUnlock, .always])
                        ?? vault.unlock(passphrase: password, levels: [.afterFirstUnlock, .always])
                } catch KeychainError.wrongPassphrase(let path) {
                    // A login cannot "try again": say what makes the next one unlock.
                    standardError("kc: the login password does not open the vault at \(path), so nothing was loaded; in the session run 'kc unlock' with the vault's passphrase, then 'kc vault passwd' to make it your login password")
                    throw ExitStatus.failure
                }
                try show(report, json: false, quietUnlessProblem: true)
            case "open_session":
                if let owner = Vault.sessionKeyringOfAnotherUser {
                    // Not the vault's problem: the status keeps what it said.
                    let service = getenv("PAM_SERVICE").map { String(cString: $0) } ?? "SERVICE"
                    standardError("kc: this session shares the session keyring of uid \(owner) (su or sudo without 'session optional pam_keyinit.so force revoke' in /etc/pam.d/\(service)), so its when-unlocked items were not loaded; in it, run 'keyctl new_session' then 'kc unlock'")
                    return
                }
                Vault.keepSessionKeyringTheUsers()
                let report = try vault.unlockWithStashedIdentity(levels: [.whenUnlocked])
                if let report { try show(report, json: false, quietUnlessProblem: true) }
            default:
                return  // close_session, account, password: nothing to do
            }
        }

        private func show(_ report: VaultUnlockReport, json: Bool, quietUnlessProblem: Bool = false) throws {
            if json {
                try printJSON(UnlockJSON(report))
            } else if !quietUnlessProblem || !report.isClean {
                var parts = Accessibility.Level.allCases.compactMap { level in report.loaded[level].map { "\($0) \(level.rawValue)" } }
                if parts.isEmpty { parts = ["nothing new"] }
                var line = "kc: unlocked; loaded " + parts.joined(separator: ", ")
                if report.alreadyLoaded > 0 { line += "; \(report.alreadyLoaded) already loaded" }
                if report.updatedFromKernel > 0 { line += "; \(report.updatedFromKernel) saved again from the kernel's newer value" }
                if report.updatedFromVault > 0 { line += "; \(report.updatedFromVault) brought up to date from the vault (another login changed them)" }
                if report.expiredRemoved > 0 { line += "; \(report.expiredRemoved) expired and removed" }
                if report.waiting > 0 { line += "; \(report.waiting) wait for their level" }
                standardError(line)
                if !report.notSavedFromMembers.isEmpty {
                    standardError("kc: not saved in the vault, as a member of the share may have written the kernel's value (the vault keeps yours; store one with 'kc set' to keep it): \(report.notSavedFromMembers.joined(separator: ", "))")
                }
                for problem in report.skippedFolders { standardError("kc: not loaded, folder skipped: \(problem.what) \(problem.reason)") }
                for problem in report.unreadable { standardError("kc: not loaded: \(problem.what) \(problem.reason)") }
                for problem in report.failed { standardError("kc: not loaded: \(problem.what): \(problem.reason)") }
                for problem in report.notSavedAgain {
                    standardError("kc: loaded, but not saved again: \(problem.what): the kernel holds a newer value than its vault file, which could not be written (\(problem.reason)); run 'kc unlock' again once that is fixed")
                }
                if !report.notLoadedForQuota.isEmpty {
                    let raise = (report.quota ?? KeyQuota(uid: getuid(), keys: 0, maxKeys: 200, bytes: 0, maxBytes: 20000)).raiseCommand()
                    standardError("kc: not loaded, the key quota is full: \(report.notLoadedForQuota.joined(separator: ", ")); remove unused items, or raise the limits: \(raise), then run 'kc unlock' again")
                }
            }
            if !report.isClean { throw ExitStatus.failure }
        }
    }

    struct Lock: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Lock the vault: drop its items from the kernel, as a screen lock would.",
            discussion: """
            Forgets the vault's key (a new unlock needs the passphrase) and drops the
            saved when-unlocked items from the kernel; --level adds other levels. Items
            stored with --ephemeral are not dropped: they exist nowhere else.

              kc lock
              kc lock --level after-first-unlock --level always
            """
        )

        @Option(name: .customLong("level"), help: ArgumentHelp("Also drop the items of this level (repeat for more).", valueName: "level"))
        var levels: [Accessibility.Level] = []

        func run() throws {
            let vault = try Vault.atDefaultLocation()
            let (dropped, wasUnlocked, skipped) = try vault.lock(levels: Swift.Set(levels + [.whenUnlocked]))
            guard vault.exists else {
                standardError("kc: locked the vault at \(vault.path), whose folder is gone: nothing was dropped; items you store from now on are kept in the kernel only, until you put the folder back and run 'kc unlock'")
                return
            }
            standardError("kc: locked\(wasUnlocked ? "" : " (it was not unlocked)"); dropped \(dropped) items from the kernel")
            // Their items may still be in the kernel: say so, and what makes a lock drop them.
            for problem in skipped {
                standardError("kc: not dropped, folder skipped: \(problem.what) \(problem.reason), then run 'kc lock' again")
            }
            if !skipped.isEmpty { throw ExitStatus.failure }
        }
    }
}

/// PAM_USER, for the `--pam` steps.
func pamUser() throws -> String {
    guard let user = getenv("PAM_USER").map({ String(cString: $0) }), !user.isEmpty else {
        standardError("kc: --pam needs PAM_USER (run it from pam_kc.so or pam_exec)")
        throw ExitStatus.usage
    }
    return user
}

/// `kc unlock --json`.
private struct UnlockJSON: Encodable {
    var loaded: [String: Int]
    var alreadyLoaded: Int
    var updatedFromKernel: Int
    var updatedFromVault: Int
    var expiredRemoved: Int
    var waiting: Int
    var unreadable: [[String: String]]
    var skippedFolders: [[String: String]]
    var failed: [[String: String]]
    var notSavedAgain: [[String: String]]
    var notLoadedForQuota: [String]
    var notSavedFromMembers: [String]

    init(_ report: VaultUnlockReport) {
        loaded = Dictionary(uniqueKeysWithValues: report.loaded.map { ($0.key.rawValue, $0.value) })
        alreadyLoaded = report.alreadyLoaded
        updatedFromKernel = report.updatedFromKernel
        updatedFromVault = report.updatedFromVault
        expiredRemoved = report.expiredRemoved
        waiting = report.waiting
        unreadable = report.unreadable.map { ["file": $0.what, "reason": $0.reason] }
        skippedFolders = report.skippedFolders.map { ["folder": $0.what, "reason": $0.reason] }
        failed = report.failed.map { ["item": $0.what, "reason": $0.reason] }
        notSavedAgain = report.notSavedAgain.map { ["item": $0.what, "reason": $0.reason] }
        notLoadedForQuota = report.notLoadedForQuota
        notSavedFromMembers = report.notSavedFromMembers
    }
}
