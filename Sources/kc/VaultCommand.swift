import ArgumentParser
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension KC {
    struct VaultCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "vault",
            abstract: "Keep items across reboots in an encrypted vault on disk.",
            discussion: """
            Without a vault kc writes nothing to disk and every item is gone at reboot.
            With one (kc vault init), every write also saves the item, encrypted (age v1
            files, X25519), in $XDG_DATA_HOME/kc (~/.local/share/kc), and 'kc unlock'
            loads them back. Reads stay in the kernel. Service and item names are
            visible on disk as file names; values are not.
            """,
            subcommands: [Init.self, Status.self, Passwd.self, Recipient.self, Identity.self, HostInit.self, Boot.self]
        )
    }
}

extension KC.VaultCommand {
    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create the vault, sealed with a passphrase.",
            discussion: """
            Asks for the passphrase twice (or reads it from --passphrase-fd N, or from
            standard input when that is not a terminal). Use your login password to
            have PAM unlock the vault at login (see the README). The vault is left
            unlocked; items stored from now on are saved.

              kc vault init
              kc vault init --work-factor 20 --passphrase-fd 3 3< passphrase.txt
            """
        )

        @OptionGroup var passphrase: PassphraseOptions

        @Option(parsing: .unconditional, help: ArgumentHelp("scrypt work factor: N = 2^factor, 10 to 22 (default 18, age's: 256 MiB and about 0.75 s on a small server; each step doubles both).", valueName: "factor"))
        var workFactor: Int = Vault.defaultWorkFactor

        func validate() throws {
            try validateWorkFactor(workFactor)
        }

        func run() throws {
            let vault = try Vault.atDefaultLocation()
            if vault.exists { throw KeychainError.vaultAlreadyExists(path: vault.path) }
            var secret = try passphrase.read(prompt: "New passphrase for the vault at \(vault.path): ", confirm: true)
            defer { secret.overwriteWithZeros() }
            try requireOneLine(secret, what: passphrase.source)
            let started = monotonicNanoseconds()
            _ = try Vault.create(at: vault, passphrase: secret, workFactor: workFactor)
            standardError("kc: vault created at \(vault.path); items you store from now on are saved (kc set --ephemeral keeps one in the kernel only)")
            noteUnlockCost(seconds: Double(monotonicNanoseconds() - started) / 1e9, workFactor: workFactor)
        }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the vault: locked or not, items per level, where it is.",
            discussion: "Exits 1 if there is no vault. --json: {\"path\", \"exists\", \"unlocked\", \"items\": {level: count}, \"workFactor\", \"hostKey\", \"lastUnlock\", \"lastError\", \"lastErrorTime\", \"loginPasswordAhead\" (when the login password changed without the vault)} (times in seconds since the epoch)."
        )

        @Flag(help: "Print JSON.")
        var json = false

        func run() throws {
            let status = try Vault.atDefaultLocation().status()
            if json {
                try printJSON(StatusJSON(status))
            } else if status.exists {
                print("vault:     \(status.path)")
                print("state:     \(status.isUnlocked ? "unlocked" : "locked (run 'kc unlock')")")
                for accessibility in Accessibility.allCases {
                    print("items:     \(status.itemCounts[accessibility] ?? 0) \(accessibility.name)")
                }
                print("work:      scrypt 2^\(status.workFactor.map(String.init) ?? "?")")
                print("host key:  \(status.hasHostKey ? "yes: always items load at boot" : "no: always items load at your first unlock (see 'kc vault host-init')")")
                print("unlocked:  \(status.lastUnlock.map(formatTime) ?? "never")")
                print("error:     \(status.lastError.map { "\(status.lastErrorTime.map(formatTime) ?? "?") \($0)" } ?? "none")")
                if let ahead = status.loginPasswordAhead {
                    print("login:     your login password changed at \(formatTime(ahead)) without the old one reaching the vault; run 'kc vault passwd' so that login unlocks it")
                }
            } else if status.isUnlocked {
                print("vault:     \(status.path)")
                print("state:     unlocked, but the folder is gone: writes are refused until you put it back (or run 'kc lock' to store without it)")
            } else {
                print("vault:     \(status.path)")
                print("state:     none (items are kept in the kernel only; create one with 'kc vault init')")
            }
            if !status.exists { throw ExitStatus.notFound }
        }
    }

    struct Passwd: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change the vault's passphrase.",
            discussion: """
            Only the vault's key is sealed again; the items are not touched. Asks for the
            old passphrase and the new one twice, or reads them from --passphrase-fd and
            --new-passphrase-fd. With PAM switched on (pam-auth-update --enable kc), a
            change of the login password through passwd changes the vault's passphrase
            too; run this when root set your login password, or to change it by hand.

            --pam is PAM's password step (pam_kc.so): it reads the old and the new login
            password, separated by a NUL byte, on standard input, becomes PAM_USER and
            changes the passphrase only if it was the old login password.
            """
        )

        @OptionGroup var passphrase: PassphraseOptions

        @Flag(help: "Run as PAM's password step (pam_kc.so; reads PAM_USER).")
        var pam = false

        @Option(parsing: .unconditional, help: ArgumentHelp("Read the new passphrase from this file descriptor.", valueName: "fd"))
        var newPassphraseFD: Int32?

        /// With --pam: PAM's preliminary pass, before the login password changes; only
        /// checks that the vault's new passphrase could be saved.
        @Flag(help: .hidden)
        var check = false

        @Option(parsing: .unconditional, help: ArgumentHelp("A new scrypt work factor (10 to 22); default: keep the current one.", valueName: "factor"))
        var workFactor: Int?

        func validate() throws {
            if let newPassphraseFD { try validateDescriptor(newPassphraseFD, option: "--new-passphrase-fd") }
            if check && !pam { throw ValidationError("--check is for PAM's password step: use it with --pam") }
            if let workFactor { try validateWorkFactor(workFactor) }
        }

        func run() throws {
            if pam { return try runForPAM() }
            let vault = try Vault.atDefaultLocation()
            guard vault.exists else { throw KeychainError.vaultNotInitialized(path: vault.path) }
            var old = try passphrase.read(prompt: "Current passphrase for the vault at \(vault.path): ")
            defer { old.overwriteWithZeros() }
            var new: [UInt8]
            if let fd = newPassphraseFD {
                new = try readPassphrase(fd: fd, what: "--new-passphrase-fd \(fd)")
            } else if standardInputIsTerminal {
                new = try askAtTerminal(prompt: "New passphrase: ", confirm: true)
            } else {
                standardError("kc: give the new passphrase with --new-passphrase-fd N when standard input is not a terminal")
                throw ExitStatus.usage
            }
            defer { new.overwriteWithZeros() }
            try requireOneLine(new, what: newPassphraseFD.map { "--new-passphrase-fd \($0)" } ?? "the terminal")
            let started = monotonicNanoseconds()
            try vault.changePassphrase(from: old, to: new, workFactor: workFactor)
            standardError("kc: passphrase changed")
            // Sealing took one scrypt at the new factor, and opening it takes another.
            if let workFactor { noteUnlockCost(seconds: (Double(monotonicNanoseconds() - started) / 1e9) / 2, workFactor: workFactor) }
        }

        /// PAM's password step: root until it becomes PAM_USER; never prompts, never
        /// fails the password change (what went wrong is in `kc vault status`).
        private func runForPAM() throws {
            let user = try pamUser()
            if check {
                try PAMUser.become(user, newSession: false)
                let vault = try Vault.atDefaultLocation()
                guard vault.exists else { return }
                do {
                    try vault.checkPassphraseCanChange()
                } catch {
                    standardError("kc: your vault's passphrase cannot follow a new password now: \(error.description.prefix { $0 != ";" }); the vault would keep opening with your old password only. Fix that first, or after the change run 'kc vault passwd'")
                    throw ExitStatus.failure
                }
                return
            }
            var input = try readPassphrase(fd: 0, what: "PAM", keepNewline: true, limit: 2 * 4096 + 1)
            defer { input.overwriteWithZeros() }
            guard let separator = input.firstIndex(of: 0) else {
                standardError("kc: --pam reads the old and the new password separated by a NUL byte (run it from pam_kc.so)")
                throw ExitStatus.usage
            }
            var old = Array(input[..<separator]), new = Array(input[(separator + 1)...])
            defer { old.overwriteWithZeros(); new.overwriteWithZeros() }
            try PAMUser.become(user, newSession: false)
            let vault = try Vault.atDefaultLocation()
            guard vault.exists, !new.isEmpty else { return }  // no vault, or nothing to follow
            switch try vault.followLoginPassword(from: old.isEmpty ? nil : old, to: new) {
            case .followed, .alreadyFollows: return
            case .oldPasswordUnknown:
                standardError("kc: the login password of \(user) was set without the old one (root: passwd \(user), chpasswd), so the vault at \(vault.path) kept its passphrase and login cannot unlock it; \(user) runs 'kc vault passwd' with the vault's old passphrase")
                throw ExitStatus.failure
            case .notTheLoginPassword:
                standardError("kc: the vault at \(vault.path) has a passphrase of its own (not the old login password), so it was left as it was; login does not unlock it ('kc vault passwd' sets it to the login password)")
                throw ExitStatus.failure
            }
        }
    }

    struct Recipient: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the vault's age recipient, to encrypt for this vault (sops, age).",
            discussion: """
            The public key (age1...) that the vault's files are encrypted to. Give it to
            a fleet repository's sops rules, or to age -r; whatever is encrypted to it,
            'kc vault identity' opens. With --host, the host key's (kc vault host-init),
            which root's services use.

              sops --encrypt --age "$(kc vault recipient)" secrets.yaml > secrets.enc.yaml
            """
        )

        @Flag(help: "The host key's recipient instead of your vault's.")
        var host = false

        func run() throws {
            if host {
                guard let recipient = HostKey.ageRecipient else {
                    standardError("kc: there is no host key in \(HostKey.folder); make one with 'sudo kc vault host-init'")
                    throw ExitStatus.failure
                }
                print(recipient)
            } else {
                print(try Vault.atDefaultLocation().ageRecipient())
            }
        }
    }

    struct Identity: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the vault's age identity to a program, for sops -d (never to a terminal).",
            discussion: """
            The secret key (AGE-SECRET-KEY-1...) that opens what is encrypted to 'kc vault
            recipient', while the vault is unlocked. It is for a program's pipe, never a
            file: sops runs it itself, so the key goes from the kernel to sops and
            nowhere else. It opens every item the vault keeps: give it only to programs
            you would give 'kc export'. With --host (as root), the host key's.

              SOPS_AGE_KEY_CMD='kc vault identity' sops --decrypt secrets.enc.yaml
              SOPS_AGE_KEY_CMD='kc vault identity' sops --decrypt --output-type dotenv app.enc.env | kc import --format env --service app
            """
        )

        @Flag(help: "The host key's identity instead of your vault's (root only).")
        var host = false

        func run() throws {
            guard isatty(1) == 0 else {
                standardError("kc: refusing to print the identity to a terminal; give it to a program: SOPS_AGE_KEY_CMD='kc vault identity' sops --decrypt FILE")
                throw ExitStatus.failure
            }
            let written: Result<Void, any Error>?
            if host {
                written = try HostKey.withAgeIdentity { text in Result { try writeStandardOutput(text); try writeStandardOutput([0x0a]) } }
            } else {
                let vault = try Vault.atDefaultLocation()
                written = try vault.withAgeIdentity { text in Result { try writeStandardOutput(text); try writeStandardOutput([0x0a]) } }
                if written == nil {
                    standardError("kc: the vault at \(vault.path) is locked, so its identity is not in the kernel; run 'kc unlock'")
                    throw ExitStatus.failure
                }
            }
            try written?.get()
        }
    }

    struct HostInit: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "host-init",
            abstract: "As root: make the host key, so always items load at boot.",
            discussion: """
            Makes /var/lib/kc/host-identity (root only) and host-recipient. Users'
            always items are then also encrypted to it (existing ones at their next
            unlock), and kc-vault-boot.service loads them into each user's persistent
            keyring at boot. Root can then read always items at rest.

              sudo kc vault host-init
              sudo systemctl enable --now kc-vault-boot.service kc-vault-refresh.timer
            """
        )

        func run() throws {
            let (recipient, created) = try HostKey.create()
            standardError(created ? "kc: host key made in \(HostKey.folder): \(recipient)" : "kc: the host key exists already in \(HostKey.folder): \(recipient)")
        }
    }

    struct Boot: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "As root, at boot: load every user's always items with the host key.",
            discussion: """
            What kc-vault-boot.service runs (and, daily, kc-vault-refresh.timer, which
            also keeps each persistent keyring from expiring). Each user is handled in
            a process of its own that becomes that user before touching a key, and is
            given --deadline seconds: a user whose load does not end by then (a
            filesystem in their home that does not answer) is stopped and named, and
            the other users still load. Exits 2 if any user's load failed.

              sudo kc vault boot
              sudo kc vault boot --user alice
            """
        )

        @Option(name: .customLong("user"), help: ArgumentHelp("Only this user (repeat for more).", valueName: "user"))
        var users: [String] = []

        @Option(help: ArgumentHelp("Seconds each user's load may take before kc stops it and goes on with the next user.", valueName: "seconds"))
        var deadline: Int = Boot.defaultDeadline

        /// One user's load, in this process: what the plain form runs for each user.
        @Option(name: .customLong("step"), help: .hidden)
        var step: String?

        /// With --step: a user without a vault of their own with always items is passed
        /// over in silence (the plain form tries every account).
        @Flag(name: .customLong("only-if-any"), help: .hidden)
        var onlyIfAny = false

        /// Far more than a load takes (milliseconds a user; the host key needs no
        /// scrypt), and the unit's TimeoutStartSec= allows for many users who hit it.
        static let defaultDeadline = 30

        func validate() throws {
            guard (1...3600).contains(deadline) else { throw ValidationError("--deadline takes 1 to 3600 seconds") }
        }

        func run() throws {
            if let user = step {
                guard let report = try HostKey.loadAlwaysItems(of: user, onlyIfAny: onlyIfAny) else { return }
                let loaded = report.loaded[.always] ?? 0
                print("kc: \(user): loaded \(loaded) always items, \(report.alreadyLoaded) already loaded, \(report.waiting) wait for an unlock")
                for problem in report.skippedFolders + report.unreadable + report.failed { standardError("kc: \(user): not loaded: \(problem.what): \(problem.reason)") }
                for problem in report.notSavedAgain { standardError("kc: \(user): loaded, but not saved again: \(problem.what): \(problem.reason)") }
                if !report.isClean { throw ExitStatus.failure }
                return
            }
            guard geteuid() == 0 else {
                standardError("kc: 'kc vault boot' runs as root (the host key is root's); try 'sudo kc vault boot'")
                throw ExitStatus.failure
            }
            // This process never looks into a home: each user's step does, as that
            // user, with a deadline, so one home that hangs holds up no one else.
            var failed = false
            for user in users.isEmpty ? HostKey.accounts() : users {
                let arguments = ["vault", "boot", "--step", user] + (users.isEmpty ? ["--only-if-any"] : [])
                switch runWithDeadline(ownExecutablePath(), arguments, seconds: deadline) {
                case .exited(0):
                    continue
                case .exited:
                    break  // the step said why
                case .killedBySignal(let signal):
                    standardError("kc: \(user): not loaded: the load was killed by signal \(signal); run 'sudo kc vault boot --user \(user)' to try again")
                case .couldNotStart:
                    standardError("kc: \(user): not loaded: cannot start \(ownExecutablePath()) for the load; check that kc is installed whole")
                case .timedOut(let ended):
                    standardError(Self.timedOut(user, after: deadline, ended: ended))
                }
                failed = true
            }
            if failed { throw ExitStatus.failure }
        }

        /// One line for a user whose load was stopped at the deadline: what hangs, the
        /// way out, and that the others go on.
        static func timedOut(_ user: String, after seconds: Int, ended: Bool) -> String {
            let folder = HostKey.vaultFolder(of: user) ?? "their home"
            let stuck = ended ? "" : " (its process is stuck in the kernel and was left behind)"
            return "kc: \(user): not loaded: the load did not end within \(seconds) seconds and was stopped\(stuck); "
                + "something in or above \(folder) does not answer, such as a filesystem mounted there whose daemon is stopped (a stopped 'kc mount'); "
                + "unmount it, then run 'sudo kc vault boot --user \(user)' (or 'kc unlock' as \(user)); the other users' items still load"
        }
    }
}

private func formatTime(_ seconds: Int64) -> String {
    var time = time_t(seconds)
    var parts = tm()
    localtime_r(&time, &parts)
    var buffer = [CChar](repeating: 0, count: 64)
    let length = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S", &parts)
    return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

private struct StatusJSON: Encodable {
    var path: String
    var exists: Bool
    var unlocked: Bool
    var items: [String: Int]
    var workFactor: Int?
    var hostKey: Bool
    var lastUnlock: Int64?
    var lastError: String?
    var loginPasswordAhead: Int64?
    var lastErrorTime: Int64?

    init(_ status: Vault.Status) {
        path = status.path
        exists = status.exists
        unlocked = status.isUnlocked
        items = Dictionary(uniqueKeysWithValues: status.itemCounts.map { ($0.key.name, $0.value) })
        workFactor = status.workFactor
        hostKey = status.hasHostKey
        lastUnlock = status.lastUnlock
        lastError = status.lastError
        loginPasswordAhead = status.loginPasswordAhead
        lastErrorTime = status.lastErrorTime
    }
}

/// Says when an unlock at a work factor above the default would not fit a login: sealing the key took
/// one scrypt at the factor, as each unlock will. pam_kc gives kc 5 s for the whole
/// login by default (its `budget=`) and stops it then, so a first login would not
/// unlock such a vault.
private func noteUnlockCost(seconds: Double, workFactor: Int) {
    // Above the default only: the default's cost is measured and stated (README).
    guard workFactor > Vault.defaultWorkFactor, seconds > 2.5 else { return }
    standardError("kc: note: at work factor \(workFactor) each unlock takes about \(Int(seconds.rounded())) s here; a login gives kc 5 s in all (pam_kc's budget=), so login may not unlock this vault: a lower --work-factor unlocks faster (each step halves it)")
}
