package canalbridge.spark;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Schema;
import org.apache.iceberg.SerializableTable;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableUtil;
import org.apache.iceberg.deletes.EqualityDeleteWriter;
import org.apache.iceberg.io.DataWriter;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.parquet.Parquet;
import org.apache.iceberg.spark.Spark3Util;
import org.apache.iceberg.spark.SparkSchemaUtil;
import org.apache.iceberg.spark.data.SparkParquetWriters;
import org.apache.iceberg.types.Types;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * An upsert commit the way streaming writers make it: an equality delete for every changed
 * key and a data row for every key's new image, written inside Spark's tasks with Iceberg's
 * own Parquet writers, then committed as one RowDelta whose summary carries the caller's
 * properties (the channel's position). Nothing reads the target, so a commit costs the same
 * into a table of any size; readers pay instead, applying the deletes until compaction.
 *
 * <p>The rows are the last change per key (spark_sink/upsert.py collapses them): the table's
 * columns by name, then {@code _op}, "D" for a key that is gone. Within one RowDelta Iceberg
 * applies the equality deletes to the data of earlier commits only, so a key's new row is
 * not deleted by its own delete. Called from spark_sink/equality.py through py4j.
 */
public final class EqualityDeltaWriter {
  private static final String OP = "_op";

  private EqualityDeltaWriter() {}

  /**
   * Why {@code identifier}'s table cannot take equality deletes keyed by {@code keys}, or null
   * when it can: a format-2 table, unpartitioned, whose identifier fields are the key.
   */
  public static String unsupported(SparkSession spark, String identifier, List<String> keys) {
    Table table = load(spark, identifier);
    if (TableUtil.formatVersion(table) < 2) {
      return "format-version 1 has no delete files";
    }
    if (!table.spec().isUnpartitioned()) {
      return "the table is partitioned";
    }
    Set<String> wanted = new TreeSet<>();
    keys.forEach(k -> wanted.add(k.toLowerCase(Locale.ROOT)));
    Set<String> identifiers = new TreeSet<>();
    table.schema().identifierFieldNames().forEach(k -> identifiers.add(k.toLowerCase(Locale.ROOT)));
    if (!wanted.equals(identifiers)) {
      return "its identifier fields " + identifiers + " are not the key " + wanted;
    }
    return null;
  }

  /**
   * Write {@code changes} into {@code identifier} (onto {@code branch}, or main when null) as
   * one RowDelta stamped with {@code properties}; returns "data files, delete files, rows
   * written, keys deleted". A failed task or commit deletes the files it wrote.
   */
  public static String commit(
      SparkSession spark,
      String identifier,
      Dataset<Row> changes,
      List<String> keys,
      String branch,
      Map<String, String> properties) {
    Table table = load(spark, identifier);
    Schema schema = table.schema();
    StructType rowType = SparkSchemaUtil.convert(schema);
    List<Column> aligned = new ArrayList<>();
    for (StructField field : rowType.fields()) {
      // The table's own types: a column widened by a DDL takes the narrower values as INSERT would.
      aligned.add(functions.col(quoted(field.name())).cast(field.dataType()).as(field.name()));
    }
    aligned.add(functions.col(OP).equalTo("D").as(OP));  // (a boolean: gone or not)
    Dataset<Row> rows = changes.select(aligned.toArray(new Column[0]));

    int[] keyIds = new int[keys.size()];
    int[] keyOrdinals = new int[keys.size()];
    for (int i = 0; i < keys.size(); i++) {
      Types.NestedField field = schema.caseInsensitiveFindField(keys.get(i));
      if (field == null) {
        throw new IllegalArgumentException("key column " + keys.get(i) + " is not in " + identifier);
      }
      keyIds[i] = field.fieldId();
      keyOrdinals[i] = rowType.fieldIndex(field.name());
    }

    JavaSparkContext context = JavaSparkContext.fromSparkContext(spark.sparkContext());
    Broadcast<Table> shipped = context.broadcast(SerializableTable.copyOf(table));
    TaskWrite write =
        new TaskWrite(shipped, UUID.randomUUID().toString(), rowType, keyIds, keyOrdinals);
    List<TaskFiles> written;
    try {
      written = rows.queryExecution().toRdd().toJavaRDD().mapPartitionsWithIndex(write, false).collect();
    } finally {
      shipped.destroy();
    }

    RowDelta delta = table.newRowDelta();
    int dataFiles = 0;
    int deleteFiles = 0;
    long inserted = 0;
    long deleted = 0;
    for (TaskFiles files : written) {
      if (files.data != null) {
        delta.addRows(files.data);
        dataFiles++;
        inserted += files.data.recordCount();
      }
      if (files.deletes != null) {
        delta.addDeletes(files.deletes);
        deleteFiles++;
        deleted += files.deletes.recordCount();
      }
    }
    properties.forEach(delta::set);
    if (branch != null) {
      delta.toBranch(branch);
    }
    try {
      delta.commit();
    } catch (RuntimeException e) {
      for (TaskFiles files : written) {
        files.delete(table);
      }
      throw e;
    }
    return dataFiles + "," + deleteFiles + "," + inserted + "," + deleted;
  }

  private static Table load(SparkSession spark, String identifier) {
    try {
      Table table = Spark3Util.loadIcebergTable(spark, identifier);
      table.refresh();
      return table;
    } catch (org.apache.spark.sql.catalyst.parser.ParseException
        | org.apache.spark.sql.catalyst.analysis.NoSuchTableException e) {
      throw new IllegalArgumentException("no Iceberg table " + identifier + ": " + e.getMessage(), e);
    }
  }

  private static String quoted(String name) {
    return "`" + name.replace("`", "``") + "`";
  }

  /** The files one task wrote: at most one data file and one equality-delete file. */
  static final class TaskFiles implements Serializable {
    private static final long serialVersionUID = 1L;
    final DataFile data;
    final DeleteFile deletes;

    TaskFiles(DataFile data, DeleteFile deletes) {
      this.data = data;
      this.deletes = deletes;
    }

    void delete(Table table) {
      try {
        if (data != null) {
          table.io().deleteFile(data.location());
        }
        if (deletes != null) {
          table.io().deleteFile(deletes.location());
        }
      } catch (RuntimeException ignored) {
        // (best effort: what stays is an orphan file, which remove_orphan_files takes)
      }
    }
  }

  /** One task's rows into a data file and an equality-delete file of the key. */
  static final class TaskWrite
      implements Function2<Integer, Iterator<InternalRow>, Iterator<TaskFiles>> {
    private static final long serialVersionUID = 1L;
    private final Broadcast<Table> table;
    private final String operation;
    private final StructType rowType;
    private final int[] keyIds;
    private final int[] keyOrdinals;

    TaskWrite(Broadcast<Table> table, String operation, StructType rowType, int[] keyIds, int[] keyOrdinals) {
      this.table = table;
      this.operation = operation;
      this.rowType = rowType;
      this.keyIds = keyIds;
      this.keyOrdinals = keyOrdinals;
    }

    @Override
    public Iterator<TaskFiles> call(Integer partition, Iterator<InternalRow> rows) throws IOException {
      if (!rows.hasNext()) {
        return Collections.emptyIterator();
      }
      Table target = table.value();
      TaskContext task = TaskContext.get();
      OutputFileFactory files =
          OutputFileFactory.builderFor(target, partition, task.taskAttemptId())
              .format(FileFormat.PARQUET)
              .operationId(operation)
              .build();
      OutputFileFactory deleteFiles =
          OutputFileFactory.builderFor(target, partition, task.taskAttemptId())
              .format(FileFormat.PARQUET)
              .operationId(operation)
              .suffix("deletes")
              .build();
      Schema keySchema = target.schema().select(keyNames(target));
      StructType keyType = SparkSchemaUtil.convert(keySchema);
      DataType[] keyTypes = new DataType[keyOrdinals.length];
      for (int i = 0; i < keyOrdinals.length; i++) {
        keyTypes[i] = rowType.fields()[keyOrdinals[i]].dataType();
      }
      int op = rowType.fields().length;
      DataWriter<InternalRow> data = null;
      EqualityDeleteWriter<InternalRow> deletes = null;
      try {
        deletes =
            Parquet.writeDeletes(deleteFiles.newOutputFile())
                .forTable(target)
                .rowSchema(keySchema)
                .equalityFieldIds(keyIds)
                .createWriterFunc(message -> SparkParquetWriters.buildWriter(keyType, message))
                .overwrite()
                .buildEqualityWriter();
        GenericInternalRow key = new GenericInternalRow(keyOrdinals.length);
        while (rows.hasNext()) {
          InternalRow row = rows.next();
          for (int i = 0; i < keyOrdinals.length; i++) {
            key.update(i, row.get(keyOrdinals[i], keyTypes[i]));
          }
          deletes.write(key);
          if (!row.getBoolean(op)) {
            if (data == null) {
              data =
                  Parquet.writeData(files.newOutputFile())
                      .forTable(target)
                      .createWriterFunc(message -> SparkParquetWriters.buildWriter(rowType, message))
                      .overwrite()
                      .build();
            }
            data.write(row);
          }
        }
        deletes.close();
        if (data != null) {
          data.close();
        }
        TaskFiles written = new TaskFiles(data == null ? null : data.toDataFile(), deletes.toDeleteFile());
        return Collections.singletonList(written).iterator();
      } catch (IOException | RuntimeException e) {
        closeQuietly(deletes);
        closeQuietly(data);
        throw e;
      }
    }

    private List<String> keyNames(Table target) {
      List<String> names = new ArrayList<>();
      for (int id : keyIds) {
        names.add(target.schema().findColumnName(id));
      }
      return names;
    }

    private static void closeQuietly(java.io.Closeable writer) {
      if (writer == null) {
        return;
      }
      try {
        writer.close();
      } catch (IOException | RuntimeException ignored) {
        // (the task's own failure is the one to report; the file is an orphan either way)
      }
    }
  }
}
