package canalbridge.spark;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.HexFormat;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.types.DataTypes;

/**
 * A channel's {@code mask}: HMAC-SHA256 of a value's text, keyed by the daemon's salt, in lower-case hex
 * (NULL stays NULL). A function of the session rather than SQL over a literal salt: the salt then never
 * appears in a query plan, and so in no plan Spark prints or puts in an error.
 */
public final class Mask implements UDF1<String, String> {
  private static final long serialVersionUID = 1L;
  private static final String ALGORITHM = "HmacSHA256";

  private final byte[] salt;
  // One per task thread: a Mac holds state between calls, and is not serializable.
  private transient ThreadLocal<Mac> macs;

  private Mask(byte[] salt) {
    this.salt = salt;
  }

  /** Registers the function as {@code name} in {@code spark}, keyed by {@code salt}. */
  public static void register(SparkSession spark, String name, String salt) {
    spark.udf().register(name, new Mask(salt.getBytes(StandardCharsets.UTF_8)), DataTypes.StringType);
  }

  @Override
  public String call(String value) throws GeneralSecurityException {
    if (value == null) {
      return null;
    }
    return HexFormat.of().formatHex(mac().doFinal(value.getBytes(StandardCharsets.UTF_8)));
  }

  private Mac mac() throws GeneralSecurityException {
    if (macs == null) {
      macs = new ThreadLocal<>();
    }
    Mac mac = macs.get();
    if (mac == null) {
      mac = Mac.getInstance(ALGORITHM);
      mac.init(new SecretKeySpec(salt, ALGORITHM));
      macs.set(mac);
    }
    return mac;
  }

  @Override
  public String toString() {
    return "Mask";  // (never the salt)
  }
}
