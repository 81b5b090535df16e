package canalbridge.spark;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.stream.IntStream;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileContent;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestReader;
import org.apache.iceberg.PartitionKey;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RewriteFiles;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableUtil;
import org.apache.iceberg.BaseTransaction;
import org.apache.iceberg.Transaction;
import org.apache.iceberg.UpdatePartitionSpec;
import org.apache.iceberg.exceptions.CleanableFailure;
import org.apache.iceberg.exceptions.CommitFailedException;
import org.apache.iceberg.deletes.EqualityDeleteWriter;
import org.apache.iceberg.encryption.EncryptedOutputFile;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.DataWriter;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.parquet.Parquet;
import org.apache.iceberg.spark.Spark3Util;
import org.apache.iceberg.spark.SparkSchemaUtil;
import org.apache.iceberg.spark.data.SparkParquetWriters;
import org.apache.iceberg.spark.source.SerializableTableWithSize;
import org.apache.iceberg.types.Types;
import org.apache.iceberg.util.StructLikeMap;
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
   * Make {@code identifier}'s table ready for equality deletes keyed by {@code keys}, or say why it
   * cannot take them (null: it can): it must be a format-2 (or later) table whose identifier fields
   * are the key. A partitioned table takes them under an unpartitioned spec of its own, where
   * Iceberg applies them to the data of every partition: an update that moves a row to another
   * partition then deletes the old row wherever it is, which a delete in the new row's partition
   * would not. A table without that spec gets one, committed as a spec that is not the default, so
   * its data stays partitioned.
   */
  public static String enable(SparkSession spark, String identifier, List<String> keys) {
    Table table = load(spark, identifier);
    String reason = unsupportedKey(table, keys);
    if (reason != null) {
      return reason;
    }
    // A spec change is not retried by Iceberg when another commit (maintenance's, another tool's) lands
    // first: it is made again on the table as it then is.
    for (int attempt = 1; globalSpec(table) == null; attempt++) {
      UpdatePartitionSpec unpartitioned = table.updateSpec();
      table.spec().fields().forEach(field -> unpartitioned.removeField(field.name()));
      try {
        unpartitioned.addNonDefaultSpec().commit();
      } catch (CommitFailedException e) {
        if (attempt == 3) {
          throw e;
        }
      }
      table.refresh();
    }
    return null;
  }

  /** Why {@code table} cannot take equality deletes keyed by {@code keys} as it is now, or null. */
  private static String unsupported(Table table, List<String> keys) {
    String reason = unsupportedKey(table, keys);
    if (reason == null && globalSpec(table) == null) {
      return "the table is partitioned and has no unpartitioned spec to hold equality deletes";
    }
    return reason;
  }

  private static String unsupportedKey(Table table, List<String> keys) {
    if (TableUtil.formatVersion(table) < 2) {
      return "format-version 1 has no delete files";
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

  /** The table's unpartitioned spec, the one its equality deletes are written under; null if none. */
  private static PartitionSpec globalSpec(Table table) {
    if (table.spec().isUnpartitioned()) {
      return table.spec();
    }
    return table.specs().values().stream()
        .filter(PartitionSpec::isUnpartitioned)
        .min(Comparator.comparingInt(PartitionSpec::specId))
        .orElse(null);
  }

  /**
   * Write {@code changes} into {@code identifier} (onto {@code branch}, or main when null) as
   * one RowDelta stamped with {@code properties}; returns "data files, delete files, rows
   * written, keys changed". A failed task deletes the files it wrote, and so does a commit that
   * is known to have failed (not one whose outcome is unknown: it may have landed).
   */
  public static String commit(
      SparkSession spark,
      String identifier,
      Dataset<Row> changes,
      List<String> keys,
      String branch,
      Map<String, String> properties) {
    Table table = load(spark, identifier);
    Written written = write(spark, table, identifier, changes, keys);
    RowDelta delta = written.into(table.newRowDelta(), properties);
    if (branch != null) {
      delta.toBranch(branch);
    }
    try {
      delta.commit();
    } catch (RuntimeException e) {
      if (e instanceof CleanableFailure) {
        written.delete(table);
      }
      throw e;
    }
    return written.summary();
  }

  /**
   * Write {@code changes} into {@code identifier} as {@link #commit} does, but stage the RowDelta
   * in a transaction of the table instead of committing it: its files, manifests and manifest
   * list are written, the table's main has not moved. {@link CatalogTransaction#publish} lands
   * it, with other tables' staged deltas, in one commit of the catalog.
   */
  public static StagedDelta stage(
      SparkSession spark,
      String identifier,
      Dataset<Row> changes,
      List<String> keys,
      Map<String, String> properties) {
    Table table = load(spark, identifier);
    Written written = write(spark, table, identifier, changes, keys);
    Transaction started = table.newTransaction();
    if (!(started instanceof BaseTransaction)) {
      written.delete(table);
      throw new IllegalStateException("canalbridge: " + identifier + "'s transaction cannot be staged ("
          + started.getClass().getName() + ")");
    }
    BaseTransaction transaction = (BaseTransaction) started;
    try {
      written.into(transaction.newRowDelta(), properties).commit();  // (into the transaction only)
    } catch (RuntimeException e) {
      written.delete(table);
      throw e;
    }
    List<ContentFile<?>> files = new ArrayList<>();
    for (TaskFiles each : written.files) {
      files.addAll(each.data);
      if (each.deletes != null) {
        files.add(each.deletes);
      }
    }
    Spark3Util.CatalogAndIdentifier named;
    try {
      named = Spark3Util.catalogAndIdentifier(spark, identifier);
    } catch (org.apache.spark.sql.catalyst.parser.ParseException e) {
      throw new IllegalArgumentException("no Iceberg table " + identifier + ": " + e.getMessage(), e);
    }
    return new StagedDelta(named.catalog().name(), Spark3Util.identifierToTableIdentifier(named.identifier()),
        identifier, table, transaction, files, written.summary());
  }

  private static Written write(
      SparkSession spark, Table table, String identifier, Dataset<Row> changes, List<String> keys) {
    String unsupported = unsupported(table, keys);
    if (unsupported != null) {
      // (changed since the writer looked: by hand, or by another tool)
      throw new IllegalStateException(
          "canalbridge: " + identifier + " no longer takes equality deletes: " + unsupported);
    }
    Schema schema = table.schema();
    StructType rowType = SparkSchemaUtil.convert(schema);
    List<Column> aligned = new ArrayList<>();
    for (StructField field : rowType.fields()) {
      // The table's own types: a column widened by a DDL takes the narrower values as INSERT would.
      aligned.add(functions.col(quoted(field.name())).cast(field.dataType()).as(field.name()));
    }
    // A boolean, so that the tasks read no string.
    aligned.add(functions.col(OP).equalTo("D").as(OP));
    Dataset<Row> rows = changes.select(aligned.toArray(new Column[0]));

    // The key in the table's column order: the delete file's schema (Schema.select) has that order,
    // whatever order the channel names the key in.
    TreeSet<Integer> ordinals = new TreeSet<>();
    for (String key : keys) {
      Types.NestedField field = schema.caseInsensitiveFindField(key);
      if (field == null) {
        throw new IllegalArgumentException("key column " + key + " is not in " + identifier);
      }
      ordinals.add(rowType.fieldIndex(field.name()));
    }
    int[] keyOrdinals = ordinals.stream().mapToInt(Integer::intValue).toArray();
    int[] keyIds = new int[keyOrdinals.length];
    for (int i = 0; i < keyOrdinals.length; i++) {
      keyIds[i] = schema.columns().get(keyOrdinals[i]).fieldId();
    }

    JavaSparkContext context = JavaSparkContext.fromSparkContext(spark.sparkContext());
    // With its size known, as Iceberg's own writes ship it: Spark would otherwise walk the copy's whole object
    // graph (an S3 FileIO's clients among it) to estimate it, on every commit. It closes the executors' copies
    // of the FileIO when the broadcast is destroyed below (the driver's copy, the catalog's own, stays open).
    Broadcast<Table> shipped = context.broadcast(SerializableTableWithSize.copyOf(table));
    int[] requiredOrdinals =
        IntStream.range(0, schema.columns().size()).filter(i -> schema.columns().get(i).isRequired()).toArray();
    TaskWrite write = new TaskWrite(shipped, UUID.randomUUID().toString(), rowType, keyIds, keyOrdinals,
        requiredOrdinals, table.spec().specId(), globalSpec(table).specId());
    try {
      return new Written(rows.queryExecution().toRdd().toJavaRDD().mapPartitionsWithIndex(write, false).collect());
    } finally {
      shipped.destroy();
    }
  }

  /** What the tasks of one write wrote. */
  private static final class Written {
    final List<TaskFiles> files;

    Written(List<TaskFiles> files) {
      this.files = files;
    }

    /** The files added to {@code delta}, stamped with {@code properties}. */
    RowDelta into(RowDelta delta, Map<String, String> properties) {
      for (TaskFiles each : files) {
        each.data.forEach(delta::addRows);
        if (each.deletes != null) {
          delta.addDeletes(each.deletes);
        }
      }
      properties.forEach(delta::set);
      return delta;
    }

    /** "data files, delete files, rows written, keys changed". */
    String summary() {
      int dataFiles = 0;
      int deleteFiles = 0;
      long inserted = 0;
      long keysChanged = 0;
      for (TaskFiles each : files) {
        for (DataFile file : each.data) {
          dataFiles++;
          inserted += file.recordCount();
        }
        if (each.deletes != null) {
          deleteFiles++;
          keysChanged += each.deletes.recordCount();
        }
      }
      return dataFiles + "," + deleteFiles + "," + inserted + "," + keysChanged;
    }

    void delete(Table table) {
      for (TaskFiles each : files) {
        each.delete(table);
      }
    }
  }

  /**
   * Remove the table's equality-delete files that apply to no live data file any more, as one
   * RewriteFiles; returns how many. Which delete applies to which file is what Iceberg's scan
   * planning says, as for every reader (by sequence number, partition and the files' column
   * bounds), so no read changes. Iceberg's own clean-up keeps those of the same sequence number as
   * the files a compaction wrote, and matches deletes to the data files of their own spec, which
   * takes a partitioned table's deletes (written under an unpartitioned spec) as dangling even where
   * they apply.
   */
  public static int removeDanglingEqualityDeletes(SparkSession spark, String identifier) throws IOException {
    Table table = load(spark, identifier);
    Snapshot current = table.currentSnapshot();
    if (current == null) {
      return 0;
    }
    Set<String> applied = new HashSet<>();
    try (CloseableIterable<FileScanTask> tasks = table.newScan().useSnapshot(current.snapshotId()).planFiles()) {
      for (FileScanTask task : tasks) {
        task.deletes().forEach(file -> applied.add(file.location()));
      }
    }
    // (A data file committed since the scanned snapshot has a higher sequence number, which no delete scanned
    // here applies to, or, written by a compaction, a subset of the rows of files the scan saw.)
    RewriteFiles rewrite = table.newRewrite().validateFromSnapshot(current.snapshotId());
    int dangling = 0;
    for (ManifestFile manifest : current.deleteManifests(table.io())) {
      try (ManifestReader<DeleteFile> files =
          ManifestFiles.readDeleteManifest(manifest, table.io(), table.specs())) {
        for (DeleteFile file : files) {
          if (file.content() == FileContent.EQUALITY_DELETES && !applied.contains(file.location())) {
            rewrite.deleteFile(file.copyWithoutStats());
            dangling++;
          }
        }
      }
    }
    if (dangling > 0) {
      rewrite.commit();
    }
    return dangling;
  }

  static Table load(SparkSession spark, String identifier) {
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

  /** The files one task wrote: a data file per partition it wrote rows into, and one equality-delete file. */
  static final class TaskFiles implements Serializable {
    private static final long serialVersionUID = 1L;
    final List<DataFile> data;
    final DeleteFile deletes;

    TaskFiles(List<DataFile> data, DeleteFile deletes) {
      this.data = data;
      this.deletes = deletes;
    }

    void delete(Table table) {
      data.forEach(file -> deleteQuietly(table, file.location()));
      deleteQuietly(table, deletes == null ? null : deletes.location());
    }
  }

  static void deleteQuietly(Table table, String location) {
    if (location == null) {
      return;
    }
    try {
      table.io().deleteFile(location);
    } catch (RuntimeException ignored) {
      // (best effort: what stays is an orphan file, which Iceberg's remove_orphan_files takes)
    }
  }

  /**
   * One task's rows into a data file per partition of the table's spec and one equality-delete
   * file of the key under the table's unpartitioned spec; on failure, none of them stays.
   */
  static final class TaskWrite
      implements Function2<Integer, Iterator<InternalRow>, Iterator<TaskFiles>> {
    private static final long serialVersionUID = 1L;
    private final Broadcast<Table> table;
    private final String operation;
    private final StructType rowType;
    private final int[] keyIds;
    private final int[] keyOrdinals;
    private final int[] requiredOrdinals;
    private final int dataSpecId;
    private final int deleteSpecId;

    TaskWrite(Broadcast<Table> table, String operation, StructType rowType, int[] keyIds, int[] keyOrdinals,
        int[] requiredOrdinals, int dataSpecId, int deleteSpecId) {
      this.table = table;
      this.operation = operation;
      this.rowType = rowType;
      this.keyIds = keyIds;
      this.keyOrdinals = keyOrdinals;
      this.requiredOrdinals = requiredOrdinals;
      this.dataSpecId = dataSpecId;
      this.deleteSpecId = deleteSpecId;
    }

    @Override
    public Iterator<TaskFiles> call(Integer partition, Iterator<InternalRow> rows) throws IOException {
      if (!rows.hasNext()) {
        return Collections.emptyIterator();
      }
      Table target = table.value();
      PartitionSpec dataSpec = target.specs().get(dataSpecId);
      PartitionSpec deleteSpec = target.specs().get(deleteSpecId);
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
      PartitionKey placed = new PartitionKey(dataSpec, target.schema());
      InternalRowStruct view = new InternalRowStruct(target.schema(), rowType);
      // (fanned out, as Iceberg's and Flink's writers do: the rows come in key order, not partition order)
      Map<StructLike, DataWriter<InternalRow>> data = StructLikeMap.create(dataSpec.partitionType());
      EqualityDeleteWriter<InternalRow> deletes = null;
      List<String> opened = new ArrayList<>();
      try {
        EncryptedOutputFile deleteFile = deleteFiles.newOutputFile();
        opened.add(deleteFile.encryptingOutputFile().location());
        deletes =
            Parquet.writeDeletes(deleteFile)
                .forTable(target)
                .withSpec(deleteSpec)
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
            for (int required : requiredOrdinals) {
              if (row.isNullAt(required)) {
                // (Iceberg's writer would fail on it with a bare NullPointerException)
                throw new IllegalArgumentException("canalbridge: NULL for column "
                    + rowType.fields()[required].name() + ", which the target declares NOT NULL");
              }
            }
            placed.partition(view.wrap(row));
            DataWriter<InternalRow> writer = data.get(placed);
            if (writer == null) {
              PartitionKey where = placed.copy();
              boolean partitioned = !dataSpec.isUnpartitioned();
              EncryptedOutputFile dataFile = partitioned ? files.newOutputFile(dataSpec, where) : files.newOutputFile();
              opened.add(dataFile.encryptingOutputFile().location());
              writer =
                  Parquet.writeData(dataFile)
                      .forTable(target)
                      .withSpec(dataSpec)
                      .withPartition(partitioned ? where : null)
                      .createWriterFunc(message -> SparkParquetWriters.buildWriter(rowType, message))
                      .overwrite()
                      .build();
              data.put(where, writer);
            }
            writer.write(row);
          }
        }
        deletes.close();
        List<DataFile> written = new ArrayList<>();
        for (DataWriter<InternalRow> writer : data.values()) {
          writer.close();
          written.add(writer.toDataFile());
        }
        return Collections.singletonList(new TaskFiles(written, deletes.toDeleteFile())).iterator();
      } catch (IOException | RuntimeException e) {
        closeQuietly(deletes);
        data.values().forEach(TaskWrite::closeQuietly);
        opened.forEach(location -> deleteQuietly(target, location));
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
