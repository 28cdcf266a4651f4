// MosipEncrypt seals a document as MOSIP's key manager seals a data share
// for a partner (io.mosip.kernel.cryptomanager.service.impl.
// CryptomanagerServiceImpl.encrypt, generateAadAndEncryptData, and
// io.mosip.kernel.crypto.jce.core.CryptoCore.asymmetricEncrypt and
// symmetricEncrypt, github.com/mosip/keymanager), written again here with
// the JCE alone for idface's tests: the abis package's Go reader must open
// what Java's JCE makes.
//
//   java MosipEncrypt.java CERT.pem DOCUMENT FORM > SHARE
//
// FORM is ver_r2 (the current form: "VER_R2", the certificate's SHA-256
// thumbprint, the RSA-OAEP-sealed AES key, "#KEY_SPLITTER#", 32 random
// bytes of AAD whose first 12 are the GCM nonce, the ciphertext and tag)
// or legacy (thumbprint, sealed key, splitter, ciphertext and tag, then a
// random 16-byte nonce; no AAD). The output is URL-safe base64, as
// CryptoUtil.encodeToURLSafeBase64 writes it.
import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.MGF1ParameterSpec;
import java.util.Base64;
import javax.crypto.Cipher;
import javax.crypto.KeyGenerator;
import javax.crypto.SecretKey;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.OAEPParameterSpec;
import javax.crypto.spec.PSource;

public class MosipEncrypt {
    public static void main(String[] args) throws Exception {
        X509Certificate cert = (X509Certificate) CertificateFactory.getInstance("X.509")
            .generateCertificate(new FileInputStream(args[0]));
        byte[] doc = Files.readAllBytes(Path.of(args[1]));
        boolean current = args[2].equals("ver_r2");
        SecureRandom rnd = new SecureRandom();
        KeyGenerator kg = KeyGenerator.getInstance("AES");
        kg.init(256);
        SecretKey key = kg.generateKey();

        Cipher gcm = Cipher.getInstance("AES/GCM/NoPadding");
        ByteArrayOutputStream data = new ByteArrayOutputStream();
        if (current) {
            byte[] aad = new byte[32];
            rnd.nextBytes(aad);
            byte[] nonce = java.util.Arrays.copyOf(aad, 12);
            gcm.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(128, nonce));
            gcm.updateAAD(aad);
            data.write(aad);
            data.write(gcm.doFinal(doc));
        } else {
            byte[] iv = new byte[gcm.getBlockSize()];
            rnd.nextBytes(iv);
            gcm.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(128, iv));
            data.write(gcm.doFinal(doc));
            data.write(iv);
        }

        Cipher rsa = Cipher.getInstance("RSA/ECB/OAEPWITHSHA-256ANDMGF1PADDING");
        rsa.init(Cipher.ENCRYPT_MODE, cert.getPublicKey(),
            new OAEPParameterSpec("SHA-256", "MGF1", MGF1ParameterSpec.SHA256, PSource.PSpecified.DEFAULT));
        byte[] sealed = rsa.doFinal(key.getEncoded());
        byte[] thumb = MessageDigest.getInstance("SHA-256").digest(cert.getEncoded());

        ByteArrayOutputStream out = new ByteArrayOutputStream();
        if (current) {
            out.write("VER_R2".getBytes());
        }
        out.write(thumb);
        out.write(sealed);
        out.write("#KEY_SPLITTER#".getBytes());
        out.write(data.toByteArray());
        System.out.print(Base64.getUrlEncoder().encodeToString(out.toByteArray()));
    }
}
