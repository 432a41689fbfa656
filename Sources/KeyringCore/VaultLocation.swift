import CKeyutils

/// Where the caller's vault is (docs/VAULT.md): `$XDG_DATA_HOME/kc` if that is an
/// absolute path, else `$HOME/.local/share/kc` if HOME is the caller's, else the home
/// folder in the password database (PAM runs kc without HOME), which only the full kc
/// looks up.
public enum VaultLocation {
    /// The folder from the environment; nil where the password database must be asked.
    public static var rootFromEnvironment: [UInt8]? {
        var status = stat()
        if let data = getenv("XDG_DATA_HOME"), data[0] == CChar(UInt8(ascii: "/")),
           // As for HOME below: `sudo -E` keeps the caller's; root must not use it.
           geteuid() != 0 || stat(data, &status) != 0 || status.st_uid == 0 {
            var root = ByteText()
            root.append(data)
            root.append("/kc")
            return root.bytes
        }
        // A HOME that is another user's (`sudo` keeping the caller's HOME) is not this
        // uid's home: root's items must not go to, or be refused by, that user's vault.
        if let home = getenv("HOME"), home[0] == CChar(UInt8(ascii: "/")),
           stat(home, &status) == 0, status.st_uid == geteuid() {
            var root = ByteText()
            root.append(home)
            root.append("/.local/share/kc")
            return root.bytes
        }
        return nil
    }

    /// The vault under the folder `home` of the password database.
    public static func root(underHome home: [UInt8]) -> [UInt8] {
        var root = ByteText(home)
        root.append("/.local/share/kc")
        return root.bytes
    }

    /// The description of the user-keyring key holding the vault's key while it is
    /// unlocked (stashed): `kc.vault:` and the vault's folder.
    public static func stashDescription(root: [UInt8]) -> [UInt8] {
        var description = ByteText()
        description.append("kc.vault:")
        description.append(root)
        return description.bytes
    }
}
