package canalbridge.spark;

import java.io.Serializable;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.UUID;
import org.apache.iceberg.Schema;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.Types;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * A Spark {@link InternalRow} of a table's columns, seen as Iceberg's {@link StructLike} with the
 * values Iceberg's partition transforms take (a string as a CharSequence, a decimal as a
 * BigDecimal, bytes as a ByteBuffer), so that a {@code PartitionKey} can place the row. Top-level
 * columns only: a partition's source is never nested in the tables canalbridge writes.
 */
final class InternalRowStruct implements StructLike, Serializable {
  private static final long serialVersionUID = 1L;
  private final Type.TypeID[] icebergTypes;
  private final DataType[] sparkTypes;
  private final int[] precisions;
  private final int[] scales;
  private transient InternalRow row;

  InternalRowStruct(Schema schema, StructType rowType) {
    List<Types.NestedField> columns = schema.columns();
    int size = columns.size();
    icebergTypes = new Type.TypeID[size];
    sparkTypes = new DataType[size];
    precisions = new int[size];
    scales = new int[size];
    for (int i = 0; i < size; i++) {
      Type type = columns.get(i).type();
      icebergTypes[i] = type.typeId();
      sparkTypes[i] = rowType.fields()[i].dataType();
      if (type instanceof Types.DecimalType) {
        precisions[i] = ((Types.DecimalType) type).precision();
        scales[i] = ((Types.DecimalType) type).scale();
      }
    }
  }

  /** This view over {@code next}. */
  InternalRowStruct wrap(InternalRow next) {
    this.row = next;
    return this;
  }

  @Override
  public int size() {
    return icebergTypes.length;
  }

  @Override
  public <T> T get(int pos, Class<T> javaClass) {
    if (row.isNullAt(pos)) {
      return null;
    }
    Object value;
    switch (icebergTypes[pos]) {
      case STRING:
        value = row.get(pos, sparkTypes[pos]).toString();  // (a UTF8String)
        break;
      case UUID:
        value = UUID.fromString(row.get(pos, sparkTypes[pos]).toString());
        break;
      case DECIMAL:
        value = row.getDecimal(pos, precisions[pos], scales[pos]).toJavaBigDecimal();
        break;
      case BINARY:
      case FIXED:
        value = ByteBuffer.wrap(row.getBinary(pos));
        break;
      default:
        value = row.get(pos, sparkTypes[pos]);  // (boolean, int, long, float, double, date, timestamp)
    }
    return javaClass.cast(value);
  }

  @Override
  public <T> void set(int pos, T value) {
    throw new UnsupportedOperationException("a view of a Spark row is read-only");
  }
}
