package canalbridge.spark;

import com.alibaba.otter.canal.protocol.CanalEntry.Column;
import com.alibaba.otter.canal.protocol.CanalEntry.EventType;
import com.alibaba.otter.canal.protocol.CanalEntry.RowChange;
import com.alibaba.otter.canal.protocol.CanalEntry.RowData;
import com.google.protobuf.InvalidProtocolBufferException;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;

/**
 * Canal's RowChange bytes turned into row changes, inside Spark: the JVM twin of
 * canalbridge.sync.schema.rows.RowMapper, so that the daemon's Python thread hands Spark
 * the bytes and never touches a cell.
 *
 * <p>Registered as a SQL function {@code (binary storeValue, string keyIndexes)
 * -> array<struct<kind, columns, values>>} by spark_sink/decode.py, which owns the
 * result type. Per change, in the binlog's order:
 *
 * <ul>
 *   <li>{@code kind}: the change vocabulary's code, +I, -U, +U or -D (an UPDATE is
 *       its old image, -U, then its new one, +U);
 *   <li>{@code columns}: on the first change of a RowChange only (null on the others),
 *       the RowChange's column signature, "name mysqlType" (then " key" for a primary-key
 *       column) joined by ", ", which Spark
 *       compares with the columns the channel expects (one table map per RowChange);
 *   <li>{@code values}: the row's values as Canal's text, null for SQL NULL.
 * </ul>
 *
 * <p>{@code keyIndexes} is "" when the writer wants every old image whole (a
 * changelog), or the key columns' indexes, comma-separated, when it keeps the last
 * row per key: then an old image carries only its key values, and an UPDATE that
 * keeps its key gives its new image alone (as BeforeImages.KEY_CHANGES does in Python).
 * A DDL, or a statement that is not a row change, gives no changes. Bytes that do not
 * parse as a RowChange give one element of kind "?" whose columns field says why.
 */
public final class RowChangeDecoder implements UDF2<byte[], String, List<Row>> {
  private static final long serialVersionUID = 1L;
  /** The kind of the one element that stands for bytes that are not a RowChange; columns holds why. */
  static final String UNDECODABLE = "?";

  @Override
  public List<Row> call(byte[] storeValue, String keyIndexes) throws Exception {
    if (storeValue == null) {
      return Collections.emptyList();
    }
    RowChange change;
    try {
      change = RowChange.parseFrom(storeValue);
    } catch (InvalidProtocolBufferException e) {
      // Spark knows the entry's position, this function does not: it fails the query there.
      return Collections.singletonList(change(UNDECODABLE, String.valueOf(e.getMessage()), null));
    }
    EventType type = change.getEventType();
    if (change.getIsDdl() || change.getRowDatasCount() == 0) {
      return Collections.emptyList();
    }
    if (type != EventType.INSERT && type != EventType.UPDATE && type != EventType.DELETE) {
      return Collections.emptyList();
    }
    int[] keys = parseIndexes(keyIndexes);
    List<Row> changes = new ArrayList<>(change.getRowDatasCount() * (type == EventType.UPDATE ? 2 : 1));
    String signature = null;
    for (RowData row : change.getRowDatasList()) {
      if (signature == null) {
        signature = signature(row.getAfterColumnsCount() > 0 ? row.getAfterColumnsList() : row.getBeforeColumnsList());
      }
      if (type == EventType.INSERT) {
        changes.add(change("+I", changes.isEmpty() ? signature : null, values(row.getAfterColumnsList())));
      } else if (type == EventType.DELETE) {
        changes.add(change("-D", changes.isEmpty() ? signature : null, before(row.getBeforeColumnsList(), keys)));
      } else {
        List<String> before = before(row.getBeforeColumnsList(), keys);
        List<String> after = values(row.getAfterColumnsList());
        if (keys == null || !sameKey(before, after, keys)) {
          changes.add(change("-U", changes.isEmpty() ? signature : null, before));
        }
        changes.add(change("+U", changes.isEmpty() ? signature : null, after));
      }
    }
    return changes;
  }

  private static Row change(String kind, String signature, List<String> values) {
    return RowFactory.create(kind, signature, values);
  }

  private static int[] parseIndexes(String keyIndexes) {
    if (keyIndexes == null || keyIndexes.isEmpty()) {
      return null;
    }
    return Arrays.stream(keyIndexes.split(",")).mapToInt(Integer::parseInt).toArray();
  }

  private static String signature(List<Column> columns) {
    StringBuilder text = new StringBuilder();
    for (Column column : columns) {
      if (text.length() > 0) {
        text.append(", ");
      }
      text.append(column.getName()).append(' ').append(canonical(column.getMysqlType()));
      if (column.getIsKey()) {
        text.append(" key");  // a primary-key column (canalbridge.sync.schema.rows.KEY_MARK)
      }
    }
    return text.toString();
  }

  // canalbridge.mysql_types.canonical's grammar and rules, kept alike (a test compares the two).
  private static final Pattern TYPE = Pattern.compile(
      "\\s*([a-z]+(?: +precision)?)\\s*(?:\\((.*)\\))?\\s*(unsigned)?\\s*(zerofill)?\\s*",
      Pattern.CASE_INSENSITIVE | Pattern.DOTALL);
  private static final Map<String, String> ALIASES = Map.of("integer", "int", "bool", "tinyint", "boolean",
      "tinyint", "numeric", "decimal", "dec", "decimal", "fixed", "decimal", "real", "double",
      "double precision", "double");
  private static final Set<String> INTEGERS = Set.of("tinyint", "smallint", "mediumint", "int", "bigint");
  private static final Set<String> WIDTH_ONE = Set.of("char", "binary", "bit");
  private static final Set<String> FRACTIONAL = Set.of("datetime", "timestamp", "time");
  private static final String BLANKS = " \t\n\r\f\u000b";
  private static final int CACHED = 4096;
  private static final Map<String, String> CANONICAL = new ConcurrentHashMap<>();

  /**
   * A column type spelled as canalbridge.mysql_types.canonical spells it, by the same rules (ASCII only):
   * Canal with its schema history on gives a column's type as its DDL spelled it.
   */
  public static String canonical(String declared) {
    String spelled = CANONICAL.get(declared);
    if (spelled == null) {
      if (CANONICAL.size() >= CACHED) {
        CANONICAL.clear();
      }
      spelled = spell(declared);
      CANONICAL.put(declared, spelled);
    }
    return spelled;
  }

  private static String spell(String declared) {
    Matcher match = TYPE.matcher(declared);
    if (!match.matches()) {
      return lowerUnquoted(declared.trim());
    }
    String base = lowerUnquoted(match.group(1)).replaceAll(" +", " ");
    base = ALIASES.getOrDefault(base, base);
    StringBuilder kept = new StringBuilder();
    boolean quoted = false;
    String raw = match.group(2) == null ? "" : match.group(2);
    for (int i = 0; i < raw.length(); i++) {
      char c = raw.charAt(i);
      if (c == '\'') {
        quoted = !quoted;
      }
      if (quoted || BLANKS.indexOf(c) < 0) {
        kept.append(c);
      }
    }
    String args = lowerUnquoted(kept.toString());
    if (INTEGERS.contains(base) || base.equals("year")) {
      args = "";
    } else if (base.equals("decimal")) {
      args = args.isEmpty() ? "10" : args;
      args = args.contains(",") ? args : args + ",0";
    } else if (WIDTH_ONE.contains(base)) {
      args = args.isEmpty() ? "1" : args;
    } else if (FRACTIONAL.contains(base) && args.equals("0")) {
      args = "";
    } else if (base.equals("float") && args.matches("[0-9]+")) {
      base = new BigInteger(args).compareTo(BigInteger.valueOf(24)) <= 0 ? "float" : "double";
      args = "";
    }
    String text = args.isEmpty() ? base : base + "(" + args + ")";
    return match.group(3) != null || match.group(4) != null ? text + " unsigned" : text;
  }

  /** The ASCII letters outside single quotes, lower-cased. */
  private static String lowerUnquoted(String text) {
    StringBuilder out = new StringBuilder(text.length());
    boolean quoted = false;
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == '\'') {
        quoted = !quoted;
      }
      out.append(!quoted && c >= 'A' && c <= 'Z' ? (char) (c + 32) : c);
    }
    return out.toString();
  }

  private static List<String> values(List<Column> columns) {
    String[] values = new String[columns.size()];
    for (int i = 0; i < values.length; i++) {
      Column column = columns.get(i);
      values[i] = column.getIsNull() ? null : column.getValue();
    }
    return Arrays.asList(values);
  }

  private static List<String> before(List<Column> columns, int[] keys) {
    if (keys == null) {
      return values(columns);
    }
    String[] values = new String[columns.size()];
    for (int index : keys) {
      if (index < values.length) {
        Column column = columns.get(index);
        values[index] = column.getIsNull() ? null : column.getValue();
      }
    }
    return Arrays.asList(values);
  }

  private static boolean sameKey(List<String> before, List<String> after, int[] keys) {
    for (int index : keys) {
      String old = index < before.size() ? before.get(index) : null;
      String now = index < after.size() ? after.get(index) : null;
      if (old == null ? now != null : !old.equals(now)) {
        return false;
      }
    }
    return true;
  }
}
