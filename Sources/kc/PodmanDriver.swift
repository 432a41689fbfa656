import ArgumentParser
import KCIntegrations
import KernelKeychain

#if canImport(Glibc)
import Glibc
#endif

extension KC {
    struct PodmanDriver: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "podman-driver",
            abstract: "Back podman's 'shell' secret driver with the keychain.",
            discussion: """
            With no action, prints the --driver-opts string for podman:

              printf s3cret | podman secret create --driver shell \\
                  --driver-opts "$(kc podman-driver)" db -
              podman run --secret db ...      # the container reads /run/secrets/db

            podman runs the actions itself, with the secret's id in $SECRET_ID: store
            (value on standard input), lookup (value to standard output), list, delete.
            Secrets are items of the service 'podman' (--service to change) at
            after-first-unlock (--access to change), so they vanish at reboot: a lookup
            of a vanished id fails with a clear message, and delete succeeds anyway so
            'podman secret rm' can clean up.
            """
        )

        typealias Action = PodmanSecretDriver.Action

        @Argument(help: "What podman asks for (list, lookup, store, delete); none prints the driver options.")
        var action: Action?

        @Option(help: "The service holding podman's secrets.")
        var service = PodmanSecretDriver.defaultService

        @Option(name: .customLong("access"), help: ArgumentHelp("Level of stored secrets.", valueName: "level"))
        var level = PodmanSecretDriver.defaultLevel

        @Flag(help: "Print a containers.conf snippet that makes this podman's default secret driver.")
        var containersConf = false

        func validate() throws {
            try validateArgument(service, as: .service)
        }

        func run() throws {
            let keychain = try podmanKeychain(service: service, level: level)
            guard let action else {
                let command = PodmanSecretDriver.driverCommand(executable: installedCommandPath(), service: service, level: level)
                if containersConf { return print(PodmanSecretDriver.containersConfiguration(command: command)) }
                return print(PodmanSecretDriver.driverOptions(command: command))
            }
            switch action {
            case .list:
                for name in try keychain.allKeys() { print(name) }
            case .lookup:
                try podmanLookup(in: keychain, service: service)
            case .store:
                let id = try secretID()
                guard var value = try readItemValue(what: "the secret") else {
                    standardError("kc: cannot read the secret from standard input")
                    throw ExitStatus.failure
                }
                defer { value.overwriteWithZeros() }
                try keychain.set(value, forKey: id)
            case .delete:
                let id = try secretID()
                let removed = try keychain.remove(id)
                if !removed { standardError("kc: podman secret \(id) was already gone from the keychain") }
            }
        }

        private func secretID() throws -> String { try podmanSecretID() }
    }
}

extension PodmanSecretDriver.Action: ExpressibleByArgument {}

/// The keychain holding podman's secrets.
func podmanKeychain(service: String, level: Accessibility.Level) throws(KeychainError) -> Keychain {
    try Keychain(service: service, accessibility: Accessibility(level: level, thisDeviceOnly: false))
}

/// `kc podman-driver lookup`, which podman runs for every container that uses a
/// secret (by the parser or by ``FastPath``).
func podmanLookup(in keychain: Keychain, service: String) throws {
    let id = try podmanSecretID()
    let written = try keychain.withBytes(forKey: id) { writeAll(fd: 1, $0) }
    if written == nil {
        standardError("kc: podman secret \(id) is not in the keychain (service '\(service)'): it was lost at a reboot or expired, or removed; create it again, or 'podman secret rm' it")
        throw ExitStatus.notFound
    }
    // podman takes what was written as the secret: a short write must not look like one.
    if written == false {
        standardError("kc: cannot write to standard output")
        throw ExitStatus.failure
    }
}

/// The secret podman asks about, from $SECRET_ID.
private func podmanSecretID() throws -> String {
    let value = getenv("SECRET_ID").map { String(cString: $0) }
    guard let id = try PodmanSecretDriver.secretID(fromEnvironment: value) else {
        standardError("kc: SECRET_ID is not set; podman sets it when it runs this driver")
        throw ExitStatus.usage
    }
    return id
}
